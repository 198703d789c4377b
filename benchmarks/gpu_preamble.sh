# Sourced by the lent-GPU scripts (h200_session.sh, h200_speed.sh), from the repo root on the GPU machine
# (carry .gpu and .gpudeps: benchmarks/pack_gpu_deps.sh): installs what the image lacks, puts the harness
# on PYTHONPATH, moves to a scratch working folder and prints the GPU's state. Sets R (the repo root), OUT
# (where results go; created) and T0 (epoch seconds at the start).
R=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=${T0:-$(date +%s)}
python3 .gpu/install_iree.py /tmp/site >/dev/null
python3 -c "import zipfile; zipfile.ZipFile('.gpudeps/pydeps.zip').extractall('/tmp/site')"
export PYTHONPATH=/tmp/site:$R PYTHONUNBUFFERED=1
[ -f "$R/REVISION" ] && export BAKEOFF_HARNESS_REV="$(cat "$R/REVISION")"  # a copy without .git
W=/tmp/bakeoff-work; mkdir -p "$W"; cd "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv
echo "cores: $(nproc)"
