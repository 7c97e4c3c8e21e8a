//! The `[topology]` table. `kind` picks a spec whose fields are the keys of that kind (and
//! whose `shape` checks them); the keys every kind takes are `CommonKeys`. Files write one
//! flat table (`kind = "star"`, `hosts = 8`, `link_gbps = 10`); a key of another kind is an
//! error that names the key and the kind's keys.

use super::schema::us;
use super::validate::{check, non_negative, positive};
use crate::topology::Shape;
use flexpass_core::{Nanos, MILLIS};
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::ser::{Error as _, SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// The `[topology]` table: the kind with its own keys, and the keys every kind takes.
#[derive(Clone, Debug)]
pub struct TopologySpec {
    pub kind: TopologyKind,
    pub common: CommonKeys,
}

/// The keys every kind takes.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommonKeys {
    /// Host link rate (and every other link's unless set), Gbit/s.
    pub link_gbps: Option<f64>,
    /// Propagation delay of every link, µs.
    pub link_delay_us: Option<f64>,
    /// Host processing delay, added to each host link in both directions, µs.
    pub host_delay_us: Option<f64>,
    /// IP MTU of every link, bytes (default 1500; 9000: jumbo frames): the senders' segment
    /// size and the credit rates, share · C · 84 / (84 + mtu + 38) (docs/protocol.md §9).
    pub mtu: Option<usize>,
    /// How a switch picks among equal-cost next hops: "ecmp" (default: a symmetric per-flow
    /// hash, ExpressPass §3.1) or "single-path" (always its first shortest-path port, as ns-2's
    /// static routing installs one route per destination: the FlexPass artifact never
    /// reaches its `Classifier/MultiPath`, which needs `$ns rtproto DV`).
    pub routing: Option<String>,
}

/// Common keys that reports list after the kinds' keys (the order `params` always had).
const REPORTED_LAST: [&str; 2] = ["mtu", "routing"];

/// The topology kinds (`kind = "…"`), each with its own keys.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum TopologyKind {
    Star(StarSpec),
    Dumbbell(DumbbellSpec),
    ParkingLot(ParkingLotSpec),
    LeafSpine(LeafSpineSpec),
    Clos3(Clos3Spec),
    ThreeDc(ThreeDcSpec),
}

/// What each kind's spec provides.
trait KindSpec: DeserializeOwned {
    /// The kind's name in files.
    const NAME: &'static str;
    /// The checked shape; `link_bps` is the common link rate (`link_gbps`).
    fn shape(&self, link_bps: f64) -> Result<Shape, String>;
}

/// `hosts` hosts on one switch.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StarSpec {
    pub hosts: Option<usize>,
}

/// `left` hosts on `s1`, `right` on `s2`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DumbbellSpec {
    pub left: Option<usize>,
    pub right: Option<usize>,
    /// Rate of the s1–s2 link, Gbit/s (default: `link_gbps`).
    pub bottleneck_gbps: Option<f64>,
    /// The left hosts' link delays spread evenly over [lo, hi] µs, and the s1–s2 link's
    /// delay, µs (default: `link_delay_us` for both).
    pub left_delay_us: Option<[f64; 2]>,
    pub bottleneck_delay_us: Option<f64>,
}

/// Switches in a chain: `bottlenecks` links between them, `hosts_per_switch` on each.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParkingLotSpec {
    pub bottlenecks: Option<usize>,
    pub hosts_per_switch: Option<usize>,
    /// Rate of the links between switches, Gbit/s (default: `link_gbps`).
    pub bottleneck_gbps: Option<f64>,
}

/// Every leaf linked to every spine.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LeafSpineSpec {
    pub leaves: Option<usize>,
    pub spines: Option<usize>,
    pub hosts_per_leaf: Option<usize>,
    /// Leaf uplink rate, Gbit/s (or derive it from `oversubscription`).
    pub uplink_gbps: Option<f64>,
    /// Hosts' capacity / uplink capacity at a leaf.
    pub oversubscription: Option<f64>,
}

/// The 3-tier Clos of FlexPass §6.2 (the defaults are the paper's).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Clos3Spec {
    pub cores: Option<usize>,
    pub aggs: Option<usize>,
    pub tors: Option<usize>,
    pub hosts: Option<usize>,
    pub aggs_per_pod: Option<usize>,
    /// Aggregation–core link rate, Gbit/s (default: `link_gbps`).
    pub core_gbps: Option<f64>,
    /// Hosts' capacity / uplink capacity at a ToR: checked against the shape.
    pub oversubscription: Option<f64>,
}

/// FlashPass §IV-B2: three data centres joined by WAN links.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ThreeDcSpec {
    /// Hosts in each data centre (20).
    pub hosts_per_dc: Option<usize>,
    /// WAN link rate, Gbit/s (10).
    pub wan_gbps: Option<f64>,
    /// The WAN links' one-way delays [dc0–dc1, dc1–dc2, dc2–dc0], µs ([20000, 30000, 40000]).
    pub wan_delay_us: Option<Vec<f64>>,
}

/// Every kind's name and keys, in the order of the docs (and of the keys in reports).
fn kinds() -> [(&'static str, &'static [&'static str]); 6] {
    fn entry<K: KindSpec>() -> (&'static str, &'static [&'static str]) {
        (K::NAME, keys::<K>())
    }
    [
        entry::<StarSpec>(),
        entry::<DumbbellSpec>(),
        entry::<ParkingLotSpec>(),
        entry::<LeafSpineSpec>(),
        entry::<Clos3Spec>(),
        entry::<ThreeDcSpec>(),
    ]
}

fn kind_names() -> String {
    kinds().map(|(name, _)| name).join(", ")
}

impl TopologyKind {
    /// The kind's name in files.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Star(_) => StarSpec::NAME,
            Self::Dumbbell(_) => DumbbellSpec::NAME,
            Self::ParkingLot(_) => ParkingLotSpec::NAME,
            Self::LeafSpine(_) => LeafSpineSpec::NAME,
            Self::Clos3(_) => Clos3Spec::NAME,
            Self::ThreeDc(_) => ThreeDcSpec::NAME,
        }
    }

    /// The kind named `name` from its keys.
    fn read(name: &str, table: toml::Table) -> Result<Self, String> {
        Ok(match name {
            StarSpec::NAME => Self::Star(read_kind(table)?),
            DumbbellSpec::NAME => Self::Dumbbell(read_kind(table)?),
            ParkingLotSpec::NAME => Self::ParkingLot(read_kind(table)?),
            LeafSpineSpec::NAME => Self::LeafSpine(read_kind(table)?),
            Clos3Spec::NAME => Self::Clos3(read_kind(table)?),
            ThreeDcSpec::NAME => Self::ThreeDc(read_kind(table)?),
            _ => {
                return Err(format!(
                    "topology.kind '{name}' is not one of {}",
                    kind_names()
                ))
            }
        })
    }

    fn shape(&self, link_bps: f64) -> Result<Shape, String> {
        match self {
            Self::Star(k) => k.shape(link_bps),
            Self::Dumbbell(k) => k.shape(link_bps),
            Self::ParkingLot(k) => k.shape(link_bps),
            Self::LeafSpine(k) => k.shape(link_bps),
            Self::Clos3(k) => k.shape(link_bps),
            Self::ThreeDc(k) => k.shape(link_bps),
        }
    }

    /// Defaults of `link_gbps`, `link_delay_us` and `host_delay_us`.
    fn link_defaults(&self) -> (f64, f64, f64) {
        match self {
            // FlexPass §6.2.
            Self::Clos3(_) => (40.0, 4.0, 2.0),
            // FlashPass §IV-B2: the DC links.
            Self::ThreeDc(_) => (1.0, 10.0, 0.0),
            _ => (10.0, 5.0, 0.0),
        }
    }
}

/// The spec of kind `K` from the keys left after `kind` and the common keys.
fn read_kind<K: KindSpec>(table: toml::Table) -> Result<K, String> {
    let own = keys::<K>();
    if let Some(k) = table.keys().find(|k| !own.contains(&k.as_str())) {
        return Err(format!(
            "topology.{k} does not apply to kind '{}' (its keys: {}, {})",
            K::NAME,
            own.join(", "),
            keys::<CommonKeys>().join(", ")
        ));
    }
    read(table)
}

/// `T` from a table; an error names the key.
fn read<T: DeserializeOwned>(table: toml::Table) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| format!("topology.{}: {}", e.path(), e.inner().message()))
}

/// The keys of a struct: the field names its derived `Deserialize` asks for, in order.
fn keys<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("keys only"))
        }
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

impl TopologySpec {
    fn from_table(mut table: toml::Table) -> Result<Self, String> {
        let name = match table.remove("kind") {
            Some(toml::Value::String(name)) => name,
            Some(v) => {
                return Err(format!(
                    "topology.kind must be one of {}, got {v}",
                    kind_names()
                ))
            }
            None => {
                return Err(format!(
                    "topology.kind is missing (one of {})",
                    kind_names()
                ))
            }
        };
        let common_keys = keys::<CommonKeys>();
        let (common, own): (toml::Table, toml::Table) = table
            .into_iter()
            .partition(|(k, _)| common_keys.contains(&k.as_str()));
        Ok(TopologySpec {
            kind: TopologyKind::read(&name, own)?,
            common: read(common)?,
        })
    }

    /// Host link rate, bits/s (default 10 Gbit/s; clos3: 40; three-dc: 1, FlashPass §IV-B2).
    pub fn link_bps(&self) -> f64 {
        self.common.link_gbps.unwrap_or(self.kind.link_defaults().0) * 1e9
    }

    /// Link delay (default 5 µs; clos3: 4; three-dc: the DC links' 10 µs, FlashPass §IV-B2).
    pub fn link_delay(&self) -> Nanos {
        us(self
            .common
            .link_delay_us
            .unwrap_or(self.kind.link_defaults().1))
    }

    /// Host processing delay (default 0; clos3: 2 µs).
    pub fn host_delay(&self) -> Nanos {
        us(self
            .common
            .host_delay_us
            .unwrap_or(self.kind.link_defaults().2))
    }

    /// IP MTU of the links (default 1500).
    pub fn mtu(&self) -> usize {
        self.common.mtu.unwrap_or(flexpass_wire::DEFAULT_MTU)
    }

    /// The validated shape.
    pub fn shape(&self) -> Result<Shape, String> {
        let c = positive(self.link_bps() / 1e9, "topology.link_gbps")? * 1e9;
        let links = &self.common;
        non_negative(links.link_delay_us.unwrap_or(0.0), "topology.link_delay_us")?;
        non_negative(links.host_delay_us.unwrap_or(0.0), "topology.host_delay_us")?;
        self.kind.shape(c)
    }
}

impl<'de> Deserialize<'de> for TopologySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::from_table(toml::Table::deserialize(d)?).map_err(de::Error::custom)
    }
}

/// Reports (`params`) show the table flat, as files write it, with every kind's keys (null
/// where they do not apply).
impl Serialize for TopologySpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let own = serde_json::to_value(&self.kind).map_err(S::Error::custom)?;
        let common = serde_json::to_value(&self.common).map_err(S::Error::custom)?;
        let mut kind_keys: Vec<&str> = vec![];
        for (_, keys) in kinds() {
            for k in keys {
                if !kind_keys.contains(k) {
                    kind_keys.push(k);
                }
            }
        }
        let (last, first): (Vec<&str>, Vec<&str>) = keys::<CommonKeys>()
            .iter()
            .partition(|k| REPORTED_LAST.contains(k));
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("kind", self.kind.name())?;
        for k in first {
            m.serialize_entry(k, &common[k])?;
        }
        for k in kind_keys {
            m.serialize_entry(k, &own[k])?;
        }
        for k in last {
            m.serialize_entry(k, &common[k])?;
        }
        m.end()
    }
}

/// A count key of kind `kind`: given or defaulted, and at least `min`.
fn count(
    v: Option<usize>,
    key: &str,
    kind: &str,
    default: Option<usize>,
    min: usize,
) -> Result<usize, String> {
    let v = v
        .or(default)
        .ok_or_else(|| format!("topology.{key} is required for kind '{kind}'"))?;
    check(v >= min, || {
        format!("topology.{key} must be >= {min}, got {v}")
    })?;
    Ok(v)
}

/// A rate key, bits/s: given, else the common link rate `link_bps`.
fn gbps(v: Option<f64>, key: &str, link_bps: f64) -> Result<f64, String> {
    match v {
        Some(g) => positive(g, &format!("topology.{key}")).map(|g| g * 1e9),
        None => Ok(link_bps),
    }
}

impl KindSpec for StarSpec {
    const NAME: &'static str = "star";
    fn shape(&self, _: f64) -> Result<Shape, String> {
        Ok(Shape::Star {
            hosts: count(self.hosts, "hosts", Self::NAME, None, 2)?,
        })
    }
}

impl KindSpec for DumbbellSpec {
    const NAME: &'static str = "dumbbell";
    fn shape(&self, link_bps: f64) -> Result<Shape, String> {
        Ok(Shape::Dumbbell {
            left: count(self.left, "left", Self::NAME, None, 1)?,
            right: count(self.right, "right", Self::NAME, None, 1)?,
            bottleneck_bps: gbps(self.bottleneck_gbps, "bottleneck_gbps", link_bps)?,
            left_delay: match self.left_delay_us {
                Some([lo, hi]) => {
                    non_negative(lo, "topology.left_delay_us[0]")?;
                    check(hi >= lo, || {
                        format!("topology.left_delay_us must be [lo, hi] with hi >= lo, got [{lo}, {hi}]")
                    })?;
                    Some(((lo * 1e3) as Nanos, (hi * 1e3) as Nanos))
                }
                None => None,
            },
            bottleneck_delay: match self.bottleneck_delay_us {
                Some(d) => Some((non_negative(d, "topology.bottleneck_delay_us")? * 1e3) as Nanos),
                None => None,
            },
        })
    }
}

impl KindSpec for ParkingLotSpec {
    const NAME: &'static str = "parking-lot";
    fn shape(&self, link_bps: f64) -> Result<Shape, String> {
        Ok(Shape::ParkingLot {
            bottlenecks: count(self.bottlenecks, "bottlenecks", Self::NAME, None, 1)?,
            hosts_per_switch: count(
                self.hosts_per_switch,
                "hosts_per_switch",
                Self::NAME,
                None,
                1,
            )?,
            bottleneck_bps: gbps(self.bottleneck_gbps, "bottleneck_gbps", link_bps)?,
        })
    }
}

impl KindSpec for LeafSpineSpec {
    const NAME: &'static str = "leaf-spine";
    fn shape(&self, link_bps: f64) -> Result<Shape, String> {
        let leaves = count(self.leaves, "leaves", Self::NAME, None, 2)?;
        let spines = count(self.spines, "spines", Self::NAME, None, 1)?;
        let per_leaf = count(self.hosts_per_leaf, "hosts_per_leaf", Self::NAME, None, 1)?;
        let uplink_bps = match (self.uplink_gbps, self.oversubscription) {
            (Some(_), Some(_)) => {
                return Err("topology: give uplink_gbps or oversubscription, not both".into())
            }
            (Some(g), None) => positive(g, "topology.uplink_gbps")? * 1e9,
            (None, Some(o)) => {
                per_leaf as f64 * link_bps
                    / (spines as f64 * positive(o, "topology.oversubscription")?)
            }
            (None, None) => link_bps,
        };
        Ok(Shape::LeafSpine {
            leaves,
            spines,
            hosts_per_leaf: per_leaf,
            uplink_bps,
        })
    }
}

impl KindSpec for Clos3Spec {
    const NAME: &'static str = "clos3";
    fn shape(&self, link_bps: f64) -> Result<Shape, String> {
        let cores = count(self.cores, "cores", Self::NAME, Some(8), 1)?;
        let aggs = count(self.aggs, "aggs", Self::NAME, Some(16), 1)?;
        let tors = count(self.tors, "tors", Self::NAME, Some(32), 1)?;
        let hosts = count(self.hosts, "hosts", Self::NAME, Some(192), 1)?;
        let per_pod = count(self.aggs_per_pod, "aggs_per_pod", Self::NAME, Some(2), 1)?;
        check(aggs % per_pod == 0, || {
            format!("topology.aggs ({aggs}) must be a multiple of aggs_per_pod ({per_pod})")
        })?;
        let pods = aggs / per_pod;
        check(tors % pods == 0, || {
            format!("topology.tors ({tors}) must be a multiple of the pods (aggs / aggs_per_pod = {pods})")
        })?;
        check(hosts % tors == 0, || {
            format!("topology.hosts ({hosts}) must be a multiple of tors ({tors})")
        })?;
        check(cores % per_pod == 0, || {
            format!("topology.cores ({cores}) must be a multiple of aggs_per_pod ({per_pod}): aggregation switch a of a pod links to cores a, a + aggs_per_pod, …")
        })?;
        if let Some(o) = self.oversubscription {
            let expect = (hosts / tors) as f64 / per_pod as f64;
            check((o - expect).abs() < 1e-9, || {
                format!("topology.oversubscription {o} does not match the shape: {} hosts per ToR over {per_pod} uplinks is {expect}", hosts / tors)
            })?;
        }
        Ok(Shape::Clos3 {
            cores,
            aggs,
            tors,
            hosts,
            aggs_per_pod: per_pod,
            core_bps: gbps(self.core_gbps, "core_gbps", link_bps)?,
        })
    }
}

impl KindSpec for ThreeDcSpec {
    const NAME: &'static str = "three-dc";
    fn shape(&self, _: f64) -> Result<Shape, String> {
        let wan_delay = match self.wan_delay_us.as_deref() {
            None => [20 * MILLIS, 30 * MILLIS, 40 * MILLIS],
            Some(&[a, b, c]) => {
                let mut out = [0; 3];
                for (i, (d, link)) in [a, b, c]
                    .into_iter()
                    .zip(["dc0–dc1", "dc1–dc2", "dc2–dc0"])
                    .enumerate()
                {
                    non_negative(d, &format!("topology.wan_delay_us[{i}] ({link})"))?;
                    out[i] = us(d);
                }
                out
            }
            Some(v) => {
                return Err(format!(
                    "topology.wan_delay_us must be three one-way delays [dc0–dc1, dc1–dc2, dc2–dc0] in µs, got {} value(s)",
                    v.len()
                ))
            }
        };
        Ok(Shape::ThreeDc {
            hosts_per_dc: count(self.hosts_per_dc, "hosts_per_dc", Self::NAME, Some(20), 1)?,
            wan_bps: match self.wan_gbps {
                Some(g) => positive(g, "topology.wan_gbps")? * 1e9,
                None => 10e9,
            },
            wan_delay,
        })
    }
}
