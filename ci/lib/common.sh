# Helpers every script of ci/ and bench/ shares (sourced, bash).
#
#   step_prefix="php build"       set before calling step (default: the script's name)
#   step TEXT...                   prints "=== PREFIX: TEXT (N s)", N seconds since sourcing
#   apt_install_missing PKG...     installs the Debian packages that are not installed
#                                  (apt-get update first; sudo when not root)
#   fail TEXT...                   prints "PREFIX: FAIL: TEXT" to stderr and exits 1
#   wait_ready PID FILE LOG WHAT   waits up to 5 s for process PID to write its
#                                  --ready-file FILE; fails (printing LOG) if it
#                                  dies or does not
#   once_per_run NAME              true the first time NAME is asked within one
#                                  ci/test.sh run (SHMLINK_CI_RUN set), always outside one

ci_start=${ci_start:-$(date +%s)}
step_prefix=${step_prefix:-$(basename "$0" .sh)}

step() { echo; echo "=== $step_prefix: $* ($(($(date +%s) - ci_start)) s)"; }

fail() {
  echo "$step_prefix: FAIL: $*" >&2
  exit 1
}

wait_ready() {
  local pid=$1 file=$2 log=$3 what=$4
  for _ in $(seq 500); do   # up to 5 s
    [ -s "$file" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "$what died"; }
    sleep 0.01
  done
  cat "$log" >&2
  fail "$what not ready in 5 s"
}

apt_install_missing() {
  local missing=() pkg sudo=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  echo "$step_prefix: apt-get install ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

once_per_run() {
  [ -n "${SHMLINK_CI_RUN:-}" ] || return 0
  local mark="$SHMLINK_CI_RUN/$1.done"
  [ -e "$mark" ] && return 1
  mkdir -p "$SHMLINK_CI_RUN" && : >"$mark"
}
