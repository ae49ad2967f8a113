# Sourced (not run) by the scripts that time their parts and keep a pinned, ignored venv
# (python_pkg_check.sh, ppo_smoke.sh). Set WHO (the prefix of printed lines) before using it.

# part NAME: print how long the previous part took, then start timing NAME.
part() {
  local now
  now=$(date +%s)
  [[ -n "${PART:-}" ]] && echo "-- $WHO: $PART: $((now - ${PART_T:-now})) s"
  PART=$1
  PART_T=$now
}

# pinned_venv VENV PINS: make VENV with pip from the requirements file PINS, unless VENV already
# holds exactly these pins (their sha256 is stamped in VENV/pins.sha256). PYTHON picks the
# interpreter that makes it (default python3).
pinned_venv() {
  local venv=$1 pins=$2 stamp
  stamp=$(sha256sum "$pins" | cut -d' ' -f1)
  if [[ -x "$venv/bin/python" ]] && [[ "$(cat "$venv/pins.sha256" 2>/dev/null)" == "$stamp" ]]; then
    echo "reusing $venv (pins unchanged)"
    return 0
  fi
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$pins" \
    || { echo "$WHO: pip could not install $pins" >&2; return 1; }
  echo "$stamp" > "$venv/pins.sha256"
}
