#!/usr/bin/env bash
# Builds the fuzz targets with cargo fuzz (libFuzzer, nightly) and runs each one for FUZZ_SECONDS
# on a scratch corpus seeded from the repository (e2e/corpus, manifests/examples, the webhook
# fixtures). Exits non-zero on a crash, a timeout or an out-of-memory input, naming the input.
#
# Usage: fuzz/run.sh [target...]        (default: every target)
# Environment: FUZZ_SECONDS (300 per target), FUZZ_TOOLCHAIN (nightly when installed),
# FUZZ_SANITIZER (address, or none), FUZZ_TARGET_DIR (fuzz/out/target; a folder outside the clone
# keeps the build between clones), CARGO_FUZZ_VERSION (installed with `cargo install` when
# cargo-fuzz is missing). Everything else it writes is under fuzz/out/ (corpora, crash inputs,
# logs) and fuzz/Cargo.lock, both ignored by git. See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-300}
toolchain=${FUZZ_TOOLCHAIN:-}
sanitizer=${FUZZ_SANITIZER:-address}
cargo_fuzz_version=${CARGO_FUZZ_VERSION:-0.13.2}
out=fuzz/out
target_dir=${FUZZ_TARGET_DIR:-$out/target}
all_targets=(manifests json_body webhook forge_webhooks)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

say() { printf 'fuzz: %s\n' "$*"; }

# Nightly when the machine has it; otherwise the default toolchain with RUSTC_BOOTSTRAP=1, which
# cargo fuzz supports for the unstable flags it passes (a fresh machine may have stable only).
if [ -z "$toolchain" ]; then
  if rustc +nightly --version >/dev/null 2>&1; then
    toolchain=nightly
  else
    toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
  fi
fi
if ! version=$(rustc "+$toolchain" --version 2>/dev/null); then
  say "no $toolchain toolchain (rustup toolchain list); set FUZZ_TOOLCHAIN (docs/fuzzing.md)"
  exit 2
fi
case $version in
  *-nightly*) ;;
  *)
    export RUSTC_BOOTSTRAP=1
    say "$version is not a nightly: building with RUSTC_BOOTSTRAP=1"
    ;;
esac

# cargo-fuzz lives outside the repository (~/.cargo/bin); a fresh machine gets it once.
if ! cargo "+$toolchain" fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz $cargo_fuzz_version (once, with cargo install)"
  started=$SECONDS
  (cd / && cargo install --locked --quiet cargo-fuzz --version "$cargo_fuzz_version")
  say "installed cargo-fuzz in $((SECONDS - started)) s"
fi

# The fuzz crate builds with the versions the main build uses: its lock starts as a copy of the
# main one whenever that changes (cargo then adds libfuzzer-sys to it).
mkdir -p "$out"
if ! cmp -s Cargo.lock "$out/main.Cargo.lock" || [ ! -f fuzz/Cargo.lock ]; then
  cp Cargo.lock fuzz/Cargo.lock
  cp Cargo.lock "$out/main.Cargo.lock"
fi

started=$SECONDS
say "building the fuzz targets ($toolchain, sanitizer $sanitizer)"
cargo "+$toolchain" fuzz build --sanitizer "$sanitizer" --debug-assertions --target-dir "$target_dir"
say "built in $((SECONDS - started)) s"
triple=$(rustc "+$toolchain" -vV | sed -n 's/^host: //p')
bin_dir=$target_dir/$triple/release

# Dictionaries: the field names and enum values of the JSON Schemas, the keys of the fixtures.
mkdir -p "$out/dict"
schema_words=$(grep -ohE '"[A-Za-z][A-Za-z0-9_./-]*"' manifests/schema/*.json | tr -d '"' | sort -u)
{
  for w in $schema_words; do printf '"%s"\n"%s: "\n' "$w" "$w"; done
  printf '"%s"\n' '---' '...' '- ' '{' '}' '[' ']' '&a ' '*a' '!!str ' '|\x0a' '>\x0a' '#' '\x22' "'"
} >"$out/dict/manifests.dict"
{
  for w in $schema_words; do printf '"\\"%s\\""\n' "$w"; done
  printf '"%s"\n' '{' '}' '[' ']' ':' ',' 'null' 'true' 'false' '-1' '1e999' '\\u0000'
} >"$out/dict/json_body.dict"
grep -ohE '"[a-z_]+":' controller/github/tests/fixtures/webhooks/*.json | sort -u |
  sed 's/"/\\"/g; s/^/"/; s/$/"/' >"$out/dict/webhook.dict"

# Seeds, copied into each target's corpus (which keeps what earlier local runs found).
seed() { # target name < content
  mkdir -p "$out/corpus/$1"
  cat >"$out/corpus/$1/seed-$2"
}
for f in $(find e2e/corpus manifests/examples -name '*.yaml' | sort); do
  seed manifests "$(echo "$f" | tr / _)" <"$f"
done
for f in controller/github/tests/fixtures/*/*.json; do
  seed json_body "$(echo "$f" | tr / _)" <"$f"
done
# The request bodies of e2e/corpus/api.yaml that are written as single-quoted JSON text.
n=0
sed -n "s/^  body: '\(.*\)'\$/\1/p" e2e/corpus/api.yaml | sed "s/''/'/g" | while IFS= read -r body; do
  n=$((n + 1))
  printf '%s' "$body" | seed json_body "api-body-$n.json"
done
# Webhook seeds start with the byte that picks their event (fuzz_targets/webhook.rs, event_name).
events=(ping pull_request pull_request_review pull_request_review_comment issue_comment check_run check_suite
  status workflow_run issues push deployment)
for f in controller/github/tests/fixtures/webhooks/*.json; do
  name=$(basename "$f" .json)
  name=${name%%.*}
  for i in "${!events[@]}"; do
    if [ "${events[$i]}" = "$name" ]; then
      { printf "\\x$(printf %02x "$i")"; cat "$f"; } | seed webhook "$(basename "$f")"
    fi
  done
done
# GitLab and Linear seeds, one per event, each starting with the byte that picks it
# (fuzz_targets/forge_webhooks.rs, EVENTS).
gl_project='"project":{"id":1,"path_with_namespace":"acme/widgets"}'
forge_seeds=(
  '{"object_kind":"merge_request",'"$gl_project"',"object_attributes":{"iid":3,"source_branch":"w/fix","action":"update"}}'
  '{"object_kind":"pipeline",'"$gl_project"',"object_attributes":{"id":5,"ref":"w/fix","sha":"abc","status":"failed"},"merge_request":{"iid":3,"source_branch":"w/fix"}}'
  '{"object_kind":"build",'"$gl_project"',"ref":"w/fix","sha":"abc","build_status":"failed"}'
  '{"object_kind":"note",'"$gl_project"',"object_attributes":{"id":9,"noteable_type":"MergeRequest","position":{"new_path":"a.rs","new_line":1}},"merge_request":{"iid":3,"source_branch":"w/fix"}}'
  '{"object_kind":"issue",'"$gl_project"',"object_attributes":{"iid":4,"action":"close"}}'
  '{"object_kind":"push",'"$gl_project"',"ref":"refs/heads/main"}'
  '{"object_kind":"tag_push",'"$gl_project"',"ref":"refs/tags/v1"}'
  '{"action":"update","type":"Issue","data":{"identifier":"ENG-4"},"updatedFrom":{"stateId":"s"},"webhookTimestamp":1700000000000}'
)
for i in "${!forge_seeds[@]}"; do
  { printf "\\x$(printf %02x "$i")"; printf '%s' "${forge_seeds[$i]}"; } | seed forge_webhooks "event-$i.json"
done
printf '"%s"\n' object_kind object_attributes path_with_namespace iid source_branch ref noteable_type \
  merge_request action type data identifier webhookTimestamp >"$out/dict/forge_webhooks.dict"

failed=0
for t in "${targets[@]}"; do
  mkdir -p "$out/artifacts/$t" "$out/logs"
  log=$out/logs/$t.log
  say "running $t for $seconds s (log: $log)"
  set +e
  RUST_BACKTRACE=1 "$bin_dir/$t" "$out/corpus/$t" -dict="$out/dict/$t.dict" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" >"$log" 2>&1
  rc=$?
  set -e
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  runs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)
  say "$t: ${runs:-?} runs, ${rate:-?} exec/s, ${cov:-no coverage line}, peak RSS $(stat peak_rss_mb) MB"
  if [ "$rc" -ne 0 ]; then
    failed=1
    # The panic message (or the sanitizer's error) and libFuzzer's summary with the input.
    grep -m1 -A4 -E 'panicked at|==ERROR|ALARM' "$log" || true
    if grep -q '^SUMMARY' "$log"; then sed -n '/^SUMMARY/,$p' "$log"; else tail -n 40 "$log"; fi
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ -n "$input" ]; then
      say "$t FAILED: the input is $input"
      say "reproduce with: $bin_dir/$t $input"
      say "  or: cargo +$toolchain fuzz run --sanitizer $sanitizer -a --target-dir $target_dir $t $input"
    else
      say "$t FAILED with exit code $rc and no input written; see $log"
    fi
  fi
done
if [ "$failed" -ne 0 ]; then
  exit 1
fi
say "no crashes in ${targets[*]} ($seconds s each)"
