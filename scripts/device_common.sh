# Sourced by the device scripts that make the benchmark files (device_cuda.sh,
# device_page_plans.sh), on the H200 machine from the project root, with $S the stem4d
# binary there.
# run COMMAND...: echo it, run it within 280 s, say how it ended.
run() { echo "\$ $*"; timeout 280 "$@"; echo "exit $?"; }
# make_file DIMS DTYPE PATH: the synthetic acquisition as a bslz4 HDF5 file, once a machine.
make_file() {
  [ -s "$3" ] && return
  local extra=()
  [ "$2" = u8 ] && extra=(--synthetic-dtype u8)
  run $S bench export-chunks --synthetic "$1" --compressed "${extra[@]}" --out "${3%.h5}" &&
    run python3 scripts/synthetic_h5.py "${3%.h5}" "$3" ${1//,/ } $2
  rm -f "${3%.h5}.chunks"
}
