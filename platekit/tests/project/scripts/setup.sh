#!/bin/sh
# Build .venv from the locks, every package hash-checked: `make setup` runs this.
#
# A line per step, with its seconds (and a dot for every 10 s while it runs); pip's whole
# output goes to .venv/setup.log (on a failure its last lines are shown). Settings come from
# the Makefile: PYTHON, TORCH_VARIANT (auto: scripts/torch_variant.py) and, if given,
# TORCH_INDEX.
set -eu

venv=.venv
log=$venv.setup.log
started=$(date +%s)
ticker=
# A step's ticker ends with the script, however it ends (Ctrl-C: 130, SIGTERM: 143).
trap 'if [ -n "$ticker" ]; then kill "$ticker" 2>/dev/null || true; fi' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
: >"$log"

fail() {  # show the log's end and stop
    echo "setup: failed: $*" >&2
    tail -n 15 "$log" >&2
    echo "setup: the whole log: $log" >&2
    exit 1
}

run() {  # run a command into the log; on failure show the log's end and stop
    "$@" >>"$log" 2>&1 || fail "$@"
}

step() {  # step "what" command...: one line, a dot per 10 s, finished with its seconds
    what=$1
    shift
    printf 'setup: %s ...' "$what"
    begun=$(date +%s)
    (
        nap=
        trap 'if [ -n "$nap" ]; then kill "$nap" 2>/dev/null; fi; exit 0' TERM  # and its sleep
        while :; do
            sleep 10 >/dev/null 2>&1 &
            nap=$!
            wait "$nap"
            printf '.'
        done
    ) &
    ticker=$!
    if ! "$@" >>"$log" 2>&1; then
        kill "$ticker"
        ticker=
        echo
        fail "$@"
    fi
    kill "$ticker"
    wait "$ticker" 2>/dev/null || true  # no dot after the seconds
    ticker=
    echo " $(($(date +%s) - begun)) s"
}

decision=$(TORCH_VARIANT="${TORCH_VARIANT:-auto}" "$PYTHON" scripts/torch_variant.py)
variant=$(echo "$decision" | sed -n 1p)
index=$(echo "$decision" | sed -n 2p)
if [ "${TORCH_INDEX+given}" = given ]; then
    index=$TORCH_INDEX
fi
echo "setup: building $venv with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])'); pip's log: $venv/setup.log"
echo "setup: $(echo "$decision" | sed -n 3p)"
grep -h '^# unhashed: ' requirements.lock | sed 's/^# /setup: /' || true

step "Python's venv" "$PYTHON" -m venv "$venv"
printf 'setup: pip and uv, pinned by pip.lock ... '
begun=$(date +%s)
if ! "$venv/bin/python" -m pip install --require-hashes --only-binary :all: -r pip.lock \
    >>"$log" 2>&1; then  # no uv wheel for this machine: pip alone
    grep -E '^pip==' pip.lock >"$venv/pip.lock"
    run "$venv/bin/python" -m pip install --require-hashes -r "$venv/pip.lock"
fi
echo "$(($(date +%s) - begun)) s"
if [ -f vendor/platekit.txt ]; then  # first: a replaced wheel stops the set-up at once
    step "platekit from vendor/, hash-checked" \
        "$venv/bin/python" -m pip install --no-deps --require-hashes -r vendor/platekit.txt
fi
"$venv/bin/python" scripts/torch_pin.py >"$venv/torch.lock"  # hashed, where the lock can
checked="hash-checked"
grep -q -- '--hash=' "$venv/torch.lock" || checked="NOT hash-checked (see the unhashed line)"
if [ "$variant" = cpu ]; then
    step "torch $variant build, $checked (about 200 MB)" \
        "$venv/bin/python" -m pip install --no-deps ${index:+--index-url "$index"} -r "$venv/torch.lock"
elif [ "$variant" = cu130 ] && [ -z "$index" ]; then
    step "torch cu130 build and its $(grep -c -E '^(nvidia|cuda)-' requirements-cu130.lock) CUDA packages of requirements-cu130.lock, hash-checked (about 3 GB)" \
        "$venv/bin/python" -m pip install --no-deps --require-hashes -r requirements-cu130.lock
else
    echo "setup: the $variant build's CUDA packages are on no index \`make lock\` reached: not hash-checked"
    version=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' requirements.lock)
    step "torch $variant build (about 3 GB)" \
        "$venv/bin/python" -m pip install ${index:+--index-url "$index"} "torch==$version"
fi
packages=$(grep -c -E '^[A-Za-z0-9]' requirements.lock)
if [ -x "$venv/bin/uv" ]; then
    step "$packages packages of requirements.lock by uv, hash-checked" "$venv/bin/uv" pip install \
        --python "$venv/bin/python" --require-hashes --no-deps -r requirements.lock
else
    step "$packages packages of requirements.lock by pip, hash-checked" \
        "$venv/bin/python" -m pip install --require-hashes -r requirements.lock
fi
step "the project (editable) and pip check" sh -c \
    "'$venv/bin/python' -m pip install --no-deps -e . && '$venv/bin/python' -m pip check"
mv "$log" "$venv/setup.log"
echo "setup: done in $(($(date +%s) - started)) s"
