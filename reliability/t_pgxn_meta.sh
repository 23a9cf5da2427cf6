#!/usr/bin/env bash
# versions: 15
# META.json, the distribution's PGXN metadata: valid against the PGXN Meta Spec 1.0.0 by
# PGXN's own validator (the pgxn_meta crate's CLI, installed by `scripts/setup clients`), and
# true to the tree: its version and each extension's are Cargo.toml's version and the
# router's default_version, every file it names exists, its license is Cargo.toml's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
source "$root/scripts/pg.sh"
bash "$root/scripts/setup" clients
validator=$SF_OPT/pgxn_meta/bin/pgxn_meta
meta=${META_JSON:-$root/META.json}

"$validator" "$meta"
python3 - "$meta" "$root" <<'PY'
import json, pathlib, re, sys
meta, root = json.load(open(sys.argv[1])), pathlib.Path(sys.argv[2])
cargo = (root / "Cargo.toml").read_text()
crate_version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
crate_license = re.search(r'^license = "([^"]+)"', cargo, re.M).group(1)
router = re.search(r"^default_version = '([^']+)'", (root / "router/snowflake_id_router.control").read_text(), re.M).group(1)
failures = []
def check(name, ok):
    print(("ok: " if ok else "FAIL: ") + name)
    if not ok:
        failures.append(name)
check(f"META.json version {meta['version']} is Cargo.toml's {crate_version}", meta["version"] == crate_version)
check(f"the router's default_version {router} is the same", router == crate_version)
provides = meta.get("provides", {})
check("it provides snowflake_id and snowflake_id_router", sorted(provides) == ["snowflake_id", "snowflake_id_router"])
for name, ext in provides.items():
    check(f"{name}: version {ext.get('version')} is {crate_version}", ext.get("version") == crate_version)
    for key in ("file", "docfile"):
        if key in ext:
            check(f"{name}: {key} {ext[key]} exists", (root / ext[key]).is_file())
check(f"license {meta['license']} is Cargo.toml's {crate_license}", meta["license"].lower() == crate_license.lower())
sys.exit(1 if failures else 0)
PY
