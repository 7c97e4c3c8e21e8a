//! `--config FILE` (TOML) for the subcommands that flatten [`ConfigArg`] (serve, send, cat,
//! workload, incast). The file's keys are the subcommand's long flag names (`link-gbps = 10`,
//! `to = ["10.0.0.2:7890"]`); each becomes a `--key=value` argument inserted right after the
//! subcommand name, before the user's own arguments, so clap parses and validates them as
//! usual. A flag given on the command line wins: its file value is not inserted at all (the
//! `Vec` flags append rather than override), and single-value flags override themselves
//! anyway (`args_override_self`).

use clap::{ArgAction, Command};
use std::any::TypeId;
use std::collections::HashSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigArg {
    /// TOML file with defaults for this command's flags: keys are the long flag names
    /// (link-gbps = 10, to = ["10.0.0.2:7890"]); flags on the command line win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The flags a config file contributed (to point at it when a value is rejected later).
#[derive(Debug)]
pub struct Applied {
    pub file: PathBuf,
    /// `--key=value` arguments inserted, in file order.
    pub args: Vec<String>,
    /// Keys the file set that the command line did not.
    pub keys: Vec<String>,
}

impl Applied {
    /// `msg` with a pointer to the config file if it names a flag the file set.
    pub fn annotate(&self, msg: String) -> String {
        let named = self.keys.iter().find(|k| mentions_flag(&msg, k));
        match named {
            Some(k) => format!("{msg} ({k} is set in {})", self.file.display()),
            None => msg,
        }
    }
}

/// Whether `msg` contains `--key` as a whole flag name.
fn mentions_flag(msg: &str, key: &str) -> bool {
    let flag = format!("--{key}");
    msg.match_indices(&flag).any(|(i, _)| {
        !msg[i + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// Inserts the arguments of the config file named by `--config` (if the subcommand in
/// `argv` has one) after the subcommand name. `argv` includes the program name.
pub fn expand(
    root: &Command,
    argv: Vec<OsString>,
) -> Result<(Vec<OsString>, Option<Applied>), String> {
    let text: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // The subcommand: the first word that is neither an option nor the value of one.
    let mut i = 1;
    let sub_at = loop {
        let Some(t) = text.get(i) else {
            return Ok((argv, None));
        };
        if t == "--" {
            return Ok((argv, None));
        }
        if !t.starts_with('-') {
            break i;
        }
        let takes_value = root.get_arguments().any(|a| {
            a.get_long().is_some_and(|l| t == &format!("--{l}"))
                && matches!(a.get_action(), ArgAction::Set | ArgAction::Append)
        });
        i += if takes_value { 2 } else { 1 };
    };
    let Some(sub) = root.find_subcommand(&text[sub_at]) else {
        return Ok((argv, None));
    };
    if !sub.get_arguments().any(|a| a.get_long() == Some("config")) {
        return Ok((argv, None));
    }
    // Flags the user gave, and the (last) config file.
    let mut given = HashSet::new();
    let mut file = None;
    let rest = &text[sub_at + 1..];
    for (j, t) in rest.iter().enumerate() {
        if t == "--" {
            break;
        }
        let Some(flag) = t.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, rest.get(j + 1).cloned()),
        };
        if name == "config" {
            // A missing value is clap's to report.
            file = value.map(PathBuf::from).or(file);
        }
        given.insert(name.to_string());
    }
    let Some(file) = file else {
        return Ok((argv, None));
    };
    let src = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read config file {}: {e}", file.display()))?;
    let applied = config_args(root, sub, &file, &src, &given)?;
    let mut out: Vec<OsString> = argv[..=sub_at].to_vec();
    out.extend(applied.args.iter().map(OsString::from));
    out.extend(argv[sub_at + 1..].iter().cloned());
    Ok((out, Some(applied)))
}

/// The `--key=value` arguments for the TOML text `src` of `file`, for the subcommand `sub`,
/// leaving out the flags in `given` (and those conflicting with them).
pub fn config_args(
    root: &Command,
    sub: &Command,
    file: &Path,
    src: &str,
    given: &HashSet<String>,
) -> Result<Applied, String> {
    let f = file.display();
    let table: toml::Table = src
        .parse()
        .map_err(|e: toml::de::Error| format!("{f}: invalid TOML: {}", e.to_string().trim_end()))?;
    let settable: Vec<&clap::Arg> = sub
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| l != "config") && !a.is_hide_set())
        .collect();
    let mut applied = Applied {
        file: file.to_path_buf(),
        args: vec![],
        keys: vec![],
    };
    for (key, value) in &table {
        let Some(arg) = settable.iter().find(|a| a.get_long() == Some(key.as_str())) else {
            if key == "config" {
                return Err(format!(
                    "{f}: a config file cannot name another one ('config')"
                ));
            }
            if root
                .get_arguments()
                .any(|a| a.get_long() == Some(key.as_str()) && a.is_global_set())
            {
                return Err(format!(
                    "{f}: '{key}' cannot be set in a config file, only on the command line"
                ));
            }
            let names = settable.iter().filter_map(|a| a.get_long());
            return Err(match suggest(key, names.clone()) {
                Some(s) => format!("{f}: unknown key '{key}' (did you mean '{s}'?)"),
                None => format!(
                    "{f}: unknown key '{key}' for `flexpass {}` (keys: {})",
                    sub.get_name(),
                    names.collect::<Vec<_>>().join(", ")
                ),
            });
        };
        let bad = |want: &str| format!("{f}: key '{key}' must be {want}, got {}", describe(value));
        // Checked even when the command line overrides them.
        let mut args = vec![];
        match arg.get_action() {
            ArgAction::SetTrue => match value {
                toml::Value::Boolean(true) => args.push(format!("--{key}")),
                toml::Value::Boolean(false) => {}
                _ => return Err(bad("true or false")),
            },
            ArgAction::Set | ArgAction::Append => {
                let multiple = matches!(arg.get_action(), ArgAction::Append)
                    || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
                let items = match value {
                    toml::Value::Array(items) if multiple => items.iter().collect(),
                    toml::Value::Array(_) => return Err(bad("a single value, not an array")),
                    v => vec![v],
                };
                if items.is_empty() {
                    return Err(bad("a non-empty array"));
                }
                let ty = arg.get_value_parser().type_id();
                let texts = items
                    .into_iter()
                    .map(|v| scalar(ty, v).map_err(|want| bad(&want)))
                    .collect::<Result<Vec<_>, _>>()?;
                match arg.get_value_delimiter() {
                    Some(d) => args.push(format!("--{key}={}", texts.join(&d.to_string()))),
                    None => args.extend(texts.iter().map(|t| format!("--{key}={t}"))),
                }
            }
            _ => return Err(format!("{f}: key '{key}' cannot be set in a config file")),
        }
        // Left out if the command line sets it or a flag conflicting with it (either way).
        let user_set = |a: &clap::Arg| a.get_long().is_some_and(|l| given.contains(l));
        if user_set(arg)
            || sub.get_arg_conflicts_with(arg).into_iter().any(user_set)
            || settable.iter().any(|u| {
                user_set(u)
                    && sub
                        .get_arg_conflicts_with(u)
                        .iter()
                        .any(|c| c.get_id() == arg.get_id())
            })
        {
            continue;
        }
        applied.args.extend(args);
        applied.keys.push(key.clone());
    }
    Ok(applied)
}

/// The command-line text of one TOML value for a flag whose values parse to type `ty`, or
/// what was expected instead.
fn scalar(ty: impl PartialEq<TypeId>, v: &toml::Value) -> Result<String, String> {
    use toml::Value as V;
    let is = |t: TypeId| ty == t;
    if is(TypeId::of::<f64>()) || is(TypeId::of::<f32>()) {
        return match v {
            V::Integer(i) => Ok(i.to_string()),
            V::Float(x) => Ok(x.to_string()),
            _ => Err("a number".into()),
        };
    }
    let unsigned = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
    ];
    let signed = [
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
    ];
    if unsigned.iter().any(|&t| is(t)) {
        return match v {
            V::Integer(i) if *i >= 0 => Ok(i.to_string()),
            _ => Err("a non-negative integer".into()),
        };
    }
    if signed.iter().any(|&t| is(t)) {
        return match v {
            V::Integer(i) => Ok(i.to_string()),
            _ => Err("an integer".into()),
        };
    }
    if is(TypeId::of::<SocketAddr>()) {
        return match v {
            V::String(s) if s.parse::<SocketAddr>().is_ok() => Ok(s.clone()),
            _ => Err("an \"IP:port\" address string".into()),
        };
    }
    match v {
        V::String(s) => Ok(s.clone()),
        // Flags of other types (strings, paths): numbers are fine as text.
        V::Integer(i) if !is(TypeId::of::<PathBuf>()) => Ok(i.to_string()),
        V::Float(x) if !is(TypeId::of::<PathBuf>()) => Ok(x.to_string()),
        _ => Err("a string".into()),
    }
}

fn describe(v: &toml::Value) -> String {
    use toml::Value as V;
    match v {
        V::String(s) => format!("the string {s:?}"),
        V::Integer(i) => format!("the integer {i}"),
        V::Float(x) => format!("the number {x}"),
        V::Boolean(b) => format!("{b}"),
        V::Datetime(d) => format!("the date {d}"),
        V::Array(_) => "an array".into(),
        V::Table(_) => "a table".into(),
    }
}

/// The closest of `names` to `key` if it is a plausible typo.
fn suggest<'a>(key: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let normal = |s: &str| s.to_lowercase().replace('_', "-");
    names
        .map(|n| (edit_distance(&normal(key), n), n))
        .filter(|&(d, n)| d <= (n.chars().count() / 3).max(1))
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

/// Levenshtein distance.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != b[j]))
                .min(row[j] + 1)
                .min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Cmd};
    use clap::{CommandFactory, FromArgMatches};
    use std::io::Write;

    /// A config file, removed when dropped.
    struct Temp(PathBuf);
    impl std::ops::Deref for Temp {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn temp_config(name: &str, text: &str) -> Temp {
        let p = std::env::temp_dir().join(format!(
            "flexpass-config-test-{}-{name}.toml",
            std::process::id()
        ));
        std::fs::File::create(&p)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .unwrap();
        Temp(p)
    }

    /// Parses `args` (without the program name) the way `main` does.
    fn parse(args: &[&str]) -> Result<Cli, String> {
        let argv = std::iter::once("flexpass")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        let cmd = Cli::command();
        let (argv, _) = expand(&cmd, argv)?;
        let m = cmd.try_get_matches_from(argv).map_err(|e| e.to_string())?;
        Cli::from_arg_matches(&m).map_err(|e| e.to_string())
    }

    fn parse_err(args: &[&str]) -> String {
        match parse(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => e,
        }
    }

    #[test]
    fn file_values_are_applied() {
        let p = temp_config(
            "applied",
            "link-gbps = 25\nw-q = 0.25\nlisten = \"127.0.0.1:7000\"\nrespond = true\ncount = 3\n",
        );
        let cli = parse(&["serve", "--config", p.to_str().unwrap()]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert_eq!(a.net.link_gbps, 25.0);
        assert_eq!(a.net.w_q, 0.25);
        assert_eq!(a.listen, "127.0.0.1:7000".parse().unwrap());
        assert!(a.respond);
        assert_eq!(a.count, Some(3));
        assert_eq!(a.tcp, None);

        let p = temp_config(
            "list",
            "to = [\"10.0.0.2:7890\", \"10.0.0.3:7890\"]\ncdf = \"webserver\"\nload = 1\n",
        );
        let cli = parse(&["workload", "--config", p.to_str().unwrap()]).unwrap();
        let Cmd::Workload(a) = cli.cmd else {
            panic!("not workload")
        };
        assert_eq!(a.to.len(), 2);
        assert_eq!(a.cdf, "webserver");
        assert_eq!(a.load, 1.0);
    }

    /// The NIC edge: a config key like any flag (the control plane's `nics:` vocabulary),
    /// an unknown edge named, and the eBPF maps refused for another edge.
    #[test]
    fn the_nic_edge_is_a_flag_and_a_config_key() {
        use flexpass_agent::edge::NicEdge;
        let p = temp_config(
            "edge",
            "nic-edge = \"ebpf\"\nnic-edge-maps = \"/sys/fs/bpf/x\"\n",
        );
        let cli = parse(&["agent", "--config", p.to_str().unwrap()]).unwrap();
        let Cmd::Agent(a) = cli.cmd else {
            panic!("not agent")
        };
        assert_eq!(a.net.nic_edge, NicEdge::Ebpf);
        assert!(a.net.validate().is_ok());
        let cli = parse(&["serve"]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert_eq!(a.net.nic_edge, NicEdge::None);
        let e = parse_err(&["serve", "--nic-edge", "smartnic"]);
        assert!(e.contains("none, qdisc, ebpf or pna"), "{e}");
        let cli = parse(&["serve", "--nic-edge", "qdisc", "--nic-edge-maps", "/x"]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        let e = a.net.validate().unwrap_err();
        assert!(
            e.contains("--nic-edge-maps") && e.contains("not qdisc"),
            "{e}"
        );
        let cli = parse(&["serve", "--nic-edge", "qdisc", "--nic-edge-dev", "eth0"]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert!(a.net.validate().is_ok());
        assert_eq!(a.net.nic_edge_dev.as_deref(), Some("eth0"));
        let cli = parse(&["serve", "--nic-edge", "ebpf", "--nic-edge-dev", "eth0"]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        let e = a.net.validate().unwrap_err();
        assert!(
            e.contains("--nic-edge-dev") && e.contains("not ebpf"),
            "{e}"
        );
        let cli = parse(&[
            "serve",
            "--nic-edge",
            "pna",
            "--nic-edge-swx",
            "127.0.0.1:8086",
        ])
        .unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert!(a.net.validate().is_ok());
        assert_eq!(a.net.nic_edge_swx.as_deref(), Some("127.0.0.1:8086"));
        let cli = parse(&[
            "serve",
            "--nic-edge",
            "qdisc",
            "--nic-edge-swx",
            "127.0.0.1:8086",
        ])
        .unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        let e = a.net.validate().unwrap_err();
        assert!(
            e.contains("--nic-edge-swx") && e.contains("not qdisc"),
            "{e}"
        );
    }

    #[test]
    fn command_line_overrides_file() {
        let p = temp_config(
            "override",
            "link-gbps = 25\nto = [\"10.0.0.2:7890\", \"10.0.0.3:7890\"]\nsize = 1000\n",
        );
        let path = p.to_str().unwrap();
        // Before and after --config: the command line wins either way.
        let cli = parse_err(&[
            "send",
            "--link-gbps",
            "40",
            "--config",
            path,
            "--to",
            "10.0.0.9:1",
        ]);
        // `to` is a single address for `send`: the file's array is rejected.
        assert!(cli.contains("key 'to' must be a single value"), "{cli}");
        let p = temp_config(
            "override2",
            "link-gbps = 25\nto = \"10.0.0.2:7890\"\nsize = 1000\n",
        );
        let path = p.to_str().unwrap();
        let cli = parse(&[
            "send",
            "--config",
            path,
            "--link-gbps",
            "40",
            "--file",
            "/dev/null",
        ])
        .unwrap();
        let Cmd::Send(a) = cli.cmd else {
            panic!("not send")
        };
        assert_eq!(a.net.link_gbps, 40.0);
        assert_eq!(a.to, "10.0.0.2:7890".parse().unwrap());
        // --file on the command line drops the file's conflicting size.
        assert_eq!(a.size, None);
        assert_eq!(a.file, Some(PathBuf::from("/dev/null")));

        let p = temp_config("override3", "to = [\"10.0.0.2:7890\", \"10.0.0.3:7890\"]\n");
        let cli = parse(&[
            "workload",
            "--to=10.0.0.9:1",
            "--config",
            p.to_str().unwrap(),
        ])
        .unwrap();
        let Cmd::Workload(a) = cli.cmd else {
            panic!("not workload")
        };
        assert_eq!(a.to, vec!["10.0.0.9:1".parse::<SocketAddr>().unwrap()]);
        // Repeated single-value flags: the last one wins.
        let cli = parse(&["serve", "--link-gbps", "1", "--link-gbps", "2"]).unwrap();
        let Cmd::Serve(a) = cli.cmd else {
            panic!("not serve")
        };
        assert_eq!(a.net.link_gbps, 2.0);
    }

    #[test]
    fn unknown_key_is_reported_with_a_suggestion() {
        let p = temp_config("unknown", "linkgbps = 10\n");
        let e = parse_err(&[
            "incast",
            "--servers",
            "1.2.3.4:5",
            "--config",
            p.to_str().unwrap(),
        ]);
        assert_eq!(
            e,
            format!(
                "{}: unknown key 'linkgbps' (did you mean 'link-gbps'?)",
                p.display()
            )
        );
        let p = temp_config("unknown2", "w_q = 0.3\n");
        let e = parse_err(&["serve", "--config", p.to_str().unwrap()]);
        assert!(
            e.ends_with("unknown key 'w_q' (did you mean 'w-q'?)"),
            "{e}"
        );
        let p = temp_config("unknown3", "colour = \"red\"\n");
        let e = parse_err(&["serve", "--config", p.to_str().unwrap()]);
        assert!(
            e.contains("unknown key 'colour' for `flexpass serve` (keys: "),
            "{e}"
        );
        let p = temp_config("unknown4", "log-level = \"debug\"\n");
        let e = parse_err(&["serve", "--config", p.to_str().unwrap()]);
        assert!(
            e.contains("'log-level' cannot be set in a config file"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_are_reported() {
        for (text, want) in [
            (
                "link-gbps = \"fast\"",
                "key 'link-gbps' must be a number, got the string \"fast\"",
            ),
            (
                "count = 2.5",
                "key 'count' must be a non-negative integer, got the number 2.5",
            ),
            (
                "listen = 7890",
                "key 'listen' must be an \"IP:port\" address string, got the integer 7890",
            ),
            (
                "respond = \"yes\"",
                "key 'respond' must be true or false, got the string \"yes\"",
            ),
            (
                "w-q = [0.5]",
                "key 'w-q' must be a single value, not an array, got an array",
            ),
            ("link-gbps = ", "invalid TOML"),
        ] {
            let p = temp_config("types", text);
            let e = parse_err(&["serve", "--config", p.to_str().unwrap()]);
            assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
            assert!(e.contains(want), "{text}: {e}");
        }
        let e = parse_err(&["serve", "--config", "/nonexistent/flexpass.toml"]);
        assert!(
            e.starts_with("cannot read config file /nonexistent/flexpass.toml"),
            "{e}"
        );
    }

    #[test]
    fn later_checks_point_at_the_file() {
        let a = Applied {
            file: "c.toml".into(),
            args: vec!["--w-q=2".into()],
            keys: vec!["w-q".into(), "load".into()],
        };
        assert_eq!(
            a.annotate("--w-q must be in (0, 1), got 2".into()),
            "--w-q must be in (0, 1), got 2 (w-q is set in c.toml)"
        );
        assert_eq!(a.annotate("--loads x".into()), "--loads x");
    }

    #[test]
    fn suggestions() {
        let names = ["link-gbps", "w-q", "rtt-us", "listen"];
        assert_eq!(
            suggest("linkgbps", names.iter().copied()),
            Some("link-gbps")
        );
        assert_eq!(suggest("RTT_US", names.iter().copied()), Some("rtt-us"));
        assert_eq!(suggest("lisen", names.iter().copied()), Some("listen"));
        assert_eq!(suggest("bandwidth", names.iter().copied()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
