# Shared pieces of the CLI test scripts (sourced, not run): the binary, a scratch directory,
# pass/fail/skip counters, and the two ways a moefuse command is expected to end.
# The sourcing script sets HARNESS_USAGE (its usage line) before sourcing.
BIN=${1:?${HARNESS_USAGE:-usage: bash tests/SCRIPT.sh path/to/moefuse}}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/stdout
ERR=$TMP/stderr
PASSED=0
FAILED=0
SKIPPED=0
HAVE_PYTHON=0
command -v python3 >/dev/null 2>&1 && HAVE_PYTHON=1

pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
skip() { echo "SKIP $1: $2"; SKIPPED=$((SKIPPED + 1)); }
fail() {
    echo "FAIL $1: $2"
    sed 's/^/    stderr: /' "$ERR" | head -5
    FAILED=$((FAILED + 1))
}

# run_ok NAME ARGS...: the command must exit 0 with nothing on stderr (stderr is a file, not a
# TTY, so no progress bar is expected either).
run_ok() {
    local name=$1
    shift
    "$BIN" "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    if [ $rc -ne 0 ]; then fail "$name" "exit $rc from: moefuse $*"; return 1; fi
    if [ -s "$ERR" ]; then fail "$name" "unexpected stderr from: moefuse $*"; return 1; fi
    return 0
}

# run_error NAME CODE CULPRIT ARGS...: exit CODE (or any non-zero code for CODE "any"), nothing
# on stdout, exactly one stderr line "moefuse: ..." that mentions CULPRIT.
run_error() {
    local name=$1 code=$2 culprit=$3
    shift 3
    "$BIN" "$@" >"$OUT" 2>"$ERR"
    local rc=$?
    local lines
    lines=$(wc -l <"$ERR")
    if [ "$code" = any ] && [ $rc -eq 0 ]; then fail "$name" "exit 0 from: moefuse $*"
    elif [ "$code" != any ] && [ $rc -ne "$code" ]; then fail "$name" "exit $rc, expected $code from: moefuse $*"
    elif [ -s "$OUT" ]; then fail "$name" "stdout not empty on error"
    elif [ "$lines" -ne 1 ]; then fail "$name" "$lines stderr lines, expected 1"
    elif ! grep -q '^moefuse: ' "$ERR"; then fail "$name" "stderr does not start with 'moefuse: '"
    elif ! grep -qF -- "$culprit" "$ERR"; then fail "$name" "message does not mention '$culprit'"
    else pass "$name"; fi
}
