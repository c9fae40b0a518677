# Sourced by the peer build scripts and bench/snmalloc.sh: crate_src NAME VERSION DIR prints where cargo unpacked the
# crate NAME at exactly VERSION, fetched through a throwaway project in DIR/fetch,
# whatever CARGO_HOME is.
crate_src() {
  local name=$1 version=$2 dir=$3
  mkdir -p "$dir/fetch/src"
  cat > "$dir/fetch/Cargo.toml" <<TOML
[package]
name = "$name-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$name = "=$version"

[workspace]
TOML
  echo 'fn main() {}' > "$dir/fetch/src/main.rs"
  cargo fetch -q --manifest-path "$dir/fetch/Cargo.toml"
  cargo metadata -q --format-version 1 --manifest-path "$dir/fetch/Cargo.toml" |
    NAME=$name python3 -c 'import json, os, sys
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == os.environ["NAME"]))'
}
