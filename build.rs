//! Links snowflake_id.so the way PostgreSQL links its own modules that use libpq (dblink,
//! PL/Proxy): with a run path to the installation's library directory when that
//! installation was configured with run paths (PGXS's `enable_rpath`; a source build's
//! default, `--disable-rpath` in Debian's packages). src/sql/node/conninfo.rs calls libpq, and a
//! backend holds one libpq only, whichever module loaded it first: without the run path a
//! PostgreSQL built under /opt on Debian 12 would load the system's older libpq through
//! this module, and dblink's next load there would fail on a newer libpq function.
//! The installation is the one cargo-pgrx builds for (PGRX_PG_CONFIG_PATH), else PG_CONFIG.
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PGRX_PG_CONFIG_PATH");
    println!("cargo::rerun-if-env-changed=PG_CONFIG");
    let Some(pg_config) = ["PGRX_PG_CONFIG_PATH", "PG_CONFIG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()))
    else {
        return;
    };
    let ask = |arg: &str| {
        Command::new(&pg_config)
            .arg(arg)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let (Some(configure), Some(libdir)) = (ask("--configure"), ask("--libdir")) else {
        return;
    };
    if !configure.contains("--disable-rpath") {
        println!("cargo::rustc-link-arg-cdylib=-Wl,-rpath,{libdir},--enable-new-dtags");
    }
}
