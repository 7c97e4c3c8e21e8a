//! Compiles the AF_XDP steering program (bpf/flexpass_xsk.c) with clang for the BPF target.
//! Without clang (or if it fails) the agent still builds: `cfg(flexpass_xdp)` is then off,
//! and at run time the agent logs why AF_XDP is unavailable and uses its UDP socket.
//! FLEXPASS_NO_XDP=1 builds that way on purpose.

use std::path::PathBuf;
use std::process::Command;

const SRC: &str = "bpf/flexpass_xsk.c";

fn main() {
    println!("cargo:rustc-check-cfg=cfg(flexpass_xdp)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-env-changed=FLEXPASS_BPF_CLANG");
    println!("cargo:rerun-if-env-changed=FLEXPASS_NO_XDP");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("flexpass_xsk.o");
    let built = if std::env::var_os("FLEXPASS_NO_XDP").is_some() {
        Err("FLEXPASS_NO_XDP set at build time".to_string())
    } else {
        compile(&out)
    };
    match built {
        Ok(clang) => {
            println!("cargo:rustc-cfg=flexpass_xdp");
            println!("cargo:rustc-env=FLEXPASS_XSK_OBJ={}", out.display());
            println!("cargo:rustc-env=FLEXPASS_XSK_BUILD=built with {clang}");
        }
        Err(why) => {
            println!("cargo:warning=AF_XDP datapath not built ({why}); the agent will use UDP sockets only");
            println!("cargo:rustc-env=FLEXPASS_XSK_BUILD={why}");
        }
    }
}

/// The first clang found (FLEXPASS_BPF_CLANG, clang, clang-19 … clang-14) that compiles the
/// program; the name of the one used, or why none did.
fn compile(out: &PathBuf) -> Result<String, String> {
    let mut candidates: Vec<String> = std::env::var("FLEXPASS_BPF_CLANG").into_iter().collect();
    candidates.push("clang".into());
    candidates.extend((14..=19).rev().map(|v| format!("clang-{v}")));
    // <linux/types.h> includes <asm/types.h>, which Debian keeps under the multiarch directory.
    let multiarch = Command::new("gcc")
        .arg("-print-multiarch")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "x86_64-linux-gnu".into());
    let mut last = "clang not found (install clang, e.g. `apt-get install clang`)".to_string();
    for clang in candidates {
        let r = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
            .arg(format!("-I/usr/include/{multiarch}"))
            .args(["-c", SRC, "-o"])
            .arg(out)
            .output();
        match r {
            Ok(o) if o.status.success() => return Ok(clang),
            Ok(o) => {
                last = format!(
                    "{clang} failed on {SRC}: {}",
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .next()
                        .unwrap_or("")
                )
            }
            Err(_) => continue,
        }
    }
    Err(last)
}
