# Timed phases for a long script (sourced by scripts/test.sh).
#
#   phase NAME           ends the phase before (printing its time) and starts NAME
#   background NAME CMD  runs CMD in the background, its output kept in a log
#   await NAME           waits for it; prints its time, and its log when it failed
#   phases_summary       the table of every phase's time and the total (at exit)
#
# A phase's line is "-- NAME: 1m05s"; the summary repeats them in order, so
# that a slow run says where its time went.

_phase_name=""
_phase_start=0
_phase_rows=()
_phases_start=$SECONDS
declare -A _bg_pid=() _bg_log=() _bg_start=()

_phase_fmt() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

_phase_row() { # NAME SECONDS
  _phase_rows+=("$(printf '%7s  %s' "$(_phase_fmt "$2")" "$1")")
}

phase_end() {
  [ -n "$_phase_name" ] || return 0
  local took=$((SECONDS - _phase_start))
  echo "-- $_phase_name: $(_phase_fmt "$took")"
  _phase_row "$_phase_name" "$took"
  _phase_name=""
}

phase() {
  phase_end
  _phase_name=$1
  _phase_start=$SECONDS
  echo "== $1"
}

background() {
  local name=$1
  shift
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/phase.XXXXXX")
  echo "== $name (in the background)"
  "$@" >"$log" 2>&1 &
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
    rm -f "${_bg_log[$name]}"
    return "$status"
  fi
  echo "-- $name (background): $(_phase_fmt "$took"), of which $(_phase_fmt "$waited") waited for"
  _phase_row "$name (background, overlapped)" "$took"
  rm -f "${_bg_log[$name]}"
}

phases_summary() {
  local status=$1
  phase_end
  echo
  echo "== time by phase"
  printf '%s\n' "${_phase_rows[@]}"
  local total=$((SECONDS - _phases_start))
  if [ "$status" -eq 0 ]; then
    echo "$(printf '%7s' "$(_phase_fmt "$total")")  in all: passed"
  else
    echo "$(printf '%7s' "$(_phase_fmt "$total")")  in all: FAILED (exit $status)"
  fi
}
