# Timed phases for a long script (sourced by scripts/test.sh).
#
#   phase NAME           ends the phase before (printing its time) and starts NAME
#   background NAME CMD  runs CMD in the background, its output kept in a log
#   await NAME           waits for it; prints its time, and its log when it failed
#   phases_summary       the table of every phase's time and the total (at exit)
#
# A phase's line is "-- NAME: 1m05s, 2m10s CPU"; the summary repeats them in
# order, so that a slow run says where its time went. CPU is user+system
# time of every process the phase ran (a background job's is its own, not
# the phase's it ended in): on a shared machine, wall time is noisy and CPU
# time is what to compare between runs.

_phase_name=""
_phase_start=0
_phase_cpu=0
_phase_rows=()
_phases_start=$SECONDS
declare -A _bg_pid=() _bg_log=() _bg_start=() _bg_cpu=()
_clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)

# _cpu_ticks [PID]: CPU the shell PID (default this one) and its reaped
# children used so far, in clock ticks (utime+stime+cutime+cstime of
# /proc/PID/stat).
_cpu_ticks() {
  local stat
  stat=$(cat "/proc/${1:-$$}/stat" 2>/dev/null) || { echo 0; return; }
  stat=${stat##*) } # fields from the third on: the command name may hold spaces
  local -a f
  read -r -a f <<< "$stat"
  echo $((f[11] + f[12] + f[13] + f[14]))
}
_phases_cpu_start=$(_cpu_ticks)

# _bg_collect: the background jobs that ended and were reaped (their CPU is
# in _cpu_ticks now) are charged: their CPU is added to _bg_pending, which
# phase_end takes out of the phase they ended in, and kept in _bg_cpu.
_bg_pending=0
_bg_collect() {
  local name t
  for name in "${!_bg_pid[@]}"; do
    [ -z "${_bg_cpu[$name]:-}" ] || continue
    [ -s "${_bg_log[$name]}.cpu" ] || continue
    kill -0 "${_bg_pid[$name]}" 2>/dev/null && continue # not reaped yet
    t=$(cat "${_bg_log[$name]}.cpu")
    rm -f "${_bg_log[$name]}.cpu"
    _bg_cpu[$name]=$t
    _bg_pending=$((_bg_pending + t))
  done
}

_phase_fmt() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

_phase_row() { # NAME SECONDS CPU-SECONDS
  _phase_rows+=("$(printf '%7s %7s  %s' "$(_phase_fmt "$2")" "$(_phase_fmt "$3")" "$1")")
}

phase_end() {
  [ -n "$_phase_name" ] || return 0
  local took=$((SECONDS - _phase_start)) now
  now=$(_cpu_ticks)
  _bg_collect
  _phase_cpu=$(((now - _phase_cpu - _bg_pending + _clk_tck / 2) / _clk_tck))
  _bg_pending=0
  echo "-- $_phase_name: $(_phase_fmt "$took"), $(_phase_fmt "$_phase_cpu") CPU"
  _phase_row "$_phase_name" "$took" "$_phase_cpu"
  _phase_name=""
}

phase() {
  phase_end
  _phase_name=$1
  _phase_start=$SECONDS
  _phase_cpu=$(_cpu_ticks)
  echo "== $1"
}

background() {
  local name=$1
  shift
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/phase.XXXXXX")
  echo "== $name (in the background)"
  # The subshell writes the CPU of what it ran (in clock ticks) to $log.cpu.
  (
    status=0
    "$@" >"$log" 2>&1 || status=$?
    _cpu_ticks "$BASHPID" >"$log.cpu"
    exit "$status"
  ) &
  _bg_pid[$name]=$!
  _bg_log[$name]=$log
  _bg_start[$name]=$SECONDS
}

await() {
  local name=$1 status=0 waited=$SECONDS
  wait "${_bg_pid[$name]}" || status=$?
  local took=$((SECONDS - _bg_start[$name]))
  waited=$((SECONDS - waited))
  if [ "$status" -ne 0 ]; then
    echo "-- $name (background) failed after $(_phase_fmt "$took"):" >&2
    cat "${_bg_log[$name]}" >&2
    rm -f "${_bg_log[$name]}" "${_bg_log[$name]}.cpu"
    return "$status"
  fi
  _bg_collect
  local cpu=$(((${_bg_cpu[$name]:-0} + _clk_tck / 2) / _clk_tck))
  echo "-- $name (background): $(_phase_fmt "$took"), $(_phase_fmt "$cpu") CPU, of which $(_phase_fmt "$waited") waited for"
  _phase_row "$name (background, overlapped)" "$took" "$cpu"
  rm -f "${_bg_log[$name]}"
}

phases_summary() {
  local status=$1
  phase_end
  echo
  echo "== time by phase (wall, CPU)"
  printf '%s\n' "${_phase_rows[@]}"
  local total=$((SECONDS - _phases_start))
  local cpu=$((($(_cpu_ticks) - _phases_cpu_start + _clk_tck / 2) / _clk_tck))
  local all
  all=$(printf '%7s %7s' "$(_phase_fmt "$total")" "$(_phase_fmt "$cpu")")
  if [ "$status" -eq 0 ]; then
    echo "$all  in all: passed"
  else
    echo "$all  in all: FAILED (exit $status)"
  fi
}
