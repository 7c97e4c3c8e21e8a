//! `flexpass agent` (the host agent daemon: every flow of the host's applications through
//! its Unix-socket API) and `flexpass run` (an unmodified program over it).

use crate::agent_cmd::{parse_transport, stop_flag};
use crate::net_args::NetArgs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct AgentArgs {
    /// UDP address of this host's agent.
    #[arg(long, default_value = "0.0.0.0:7890")]
    pub listen: SocketAddr,
    /// Unix socket of the local API (docs/agent-api.md).
    #[arg(long, default_value = "/run/flexpass/agent.sock")]
    pub socket: PathBuf,
    /// UDP port of the peers' agents, for TCP connections of applications run with
    /// `flexpass run` [default: the port of --listen].
    #[arg(long)]
    pub peer_port: Option<u16>,
    /// A peer that leaves a connection's HELLO unanswered this long does not speak
    /// FlexPass: the application connects to it with kernel TCP (cached per peer for 60 s).
    #[arg(long, default_value_t = 300)]
    pub conn_fallback_ms: u64,
    /// Also let this user (uid) use the API socket (repeatable; the socket file is then
    /// mode 0666 and the peer-credential check is the gate). Root and the agent's own user
    /// always may.
    #[arg(long, value_name = "UID")]
    pub allow_uid: Vec<u32>,
    /// Also let members of this group (gid; primary or supplementary) use the API socket
    /// (repeatable; the socket file is then mode 0660, group the first one).
    #[arg(long, value_name = "GID")]
    pub allow_gid: Vec<u32>,
    /// Let `tcp_listen` with "inproc" hand a port's connections to the listening process,
    /// which answers from its own UDP socket (docs/agent-api.md, "In-process listeners").
    /// Off by default: a peer's agent older than the move rule (docs/protocol.md §11) cannot
    /// follow such an answer.
    #[arg(long)]
    pub inproc_listen: bool,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
}

/// The long-running agent: every flow of this host's applications, through the local API.
pub fn agent(args: AgentArgs) -> Result<(), String> {
    let stop = stop_flag()?;
    match flexpass_agent::daemon::raise_fd_limit() {
        Ok(n) => log::info!(
            "flexpass agent: up to {n} file descriptors (RLIMIT_NOFILE): one per TCP \
             connection carried and per API client"
        ),
        Err(e) => log::warn!("flexpass agent: cannot raise RLIMIT_NOFILE: {e}"),
    }
    let ep = args.net.endpoint(args.listen, true)?;
    if let Some(dir) = args.socket.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut daemon = flexpass_agent::daemon::Daemon::new(ep, &args.socket)
        .map_err(|e| format!("cannot serve the API on {}: {e}", args.socket.display()))?;
    if let Some(p) = args.peer_port {
        daemon.set_peer_port(p);
    }
    daemon.set_conn_fallback(Duration::from_millis(args.conn_fallback_ms));
    daemon.set_inproc_listen(args.inproc_listen);
    daemon
        .set_access(flexpass_agent::daemon::ApiAccess {
            allow_uids: args.allow_uid.clone(),
            allow_gids: args.allow_gid.clone(),
        })
        .map_err(|e| format!("cannot set the access of {}: {e}", args.socket.display()))?;
    log::info!(
        "flexpass agent: udp {} api {}",
        daemon.endpoint().local_addr().map_err(|e| e.to_string())?,
        args.socket.display()
    );
    daemon.run(&stop).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&args.socket);
    eprintln!(
        "flexpass agent: {}",
        serde_json::to_string(&daemon.endpoint().stats).expect("stats serialise")
    );
    Ok(())
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Which TCP connections use FlexPass: `ports=5201,8000-8010;nets=10.0.0.0/8` (ports:
    /// destination ports of clients and listening ports of servers; nets: client
    /// destinations; `*` = all; `off`) [default: every port, every non-loopback IPv4
    /// destination].
    #[arg(long)]
    pub policy: Option<String>,
    /// The local agent's API socket.
    #[arg(long, default_value = "/run/flexpass/agent.sock")]
    pub agent_socket: PathBuf,
    /// The connections' transport: flexpass, expresspass, dctcp, ppt, flashpass, pfabric or
    /// pase [default: $FLEXPASS_TRANSPORT, else flexpass].
    #[arg(long)]
    pub transport: Option<String>,
    /// libflexpass.so to preload [default: $FLEXPASS_PRELOAD, else next to this binary].
    #[arg(long)]
    pub preload: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub cmd: Vec<std::ffi::OsString>,
}

/// `flexpass run -- CMD`: exec CMD with libflexpass.so preloaded, so its TCP connections
/// that match the policy go over FlexPass through the local agent (README "Unmodified
/// applications").
pub fn run(args: RunArgs) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    if let Some(t) = &args.transport {
        parse_transport(t)?
            .ok_or("--transport tcp makes no sense here: without flexpass run it is kernel TCP")?;
    }
    let lib = match args
        .preload
        .or_else(|| std::env::var_os("FLEXPASS_PRELOAD").map(PathBuf::from))
    {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this binary: {e}"))?
            .with_file_name("libflexpass.so"),
    };
    let lib = lib.canonicalize().map_err(|e| {
        format!(
            "{}: {e} (build it: cargo build --release -p flexpass-preload, or --preload PATH)",
            lib.display()
        )
    })?;
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(" ");
        preload.push(old);
    }
    let mut cmd = std::process::Command::new(&args.cmd[0]);
    cmd.args(&args.cmd[1..])
        .env("LD_PRELOAD", preload)
        .env("FLEXPASS_AGENT_SOCKET", &args.agent_socket);
    if let Some(t) = &args.transport {
        cmd.env("FLEXPASS_TRANSPORT", t);
    }
    if let Some(p) = &args.policy {
        cmd.env("FLEXPASS_POLICY", p);
    }
    let err = cmd.exec();
    Err(format!(
        "cannot run {}: {err}",
        args.cmd[0].to_string_lossy()
    ))
}
