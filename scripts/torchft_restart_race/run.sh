#!/bin/bash
# The real components behind scenarios/torchft/restarted_rank_reads_old_manager_address:
# torchft 0.2.0's Lighthouse and two replica groups of 2 ranks, each under torchrun
# --max_restarts=2 (torchx hsdp's shape), on Gloo; group 0's rank 0 SIGKILLs itself at
# step 10. Each run takes about a minute; its logs are g<group>.<run>.log here.
#   RUN=1 scripts/torchft_restart_race/run.sh && python3 scripts/torchft_restart_race/tally.py 1
# Other shapes: NPROC0 (group 0's ranks, default 2), NGROUPS (default 2), RESTARTS
# (--max_restarts, default 2), JOIN_MS (the Lighthouse's join timeout, default 60000),
# SECS (each torchrun's time limit, default 55), e.g. a 4-rank group beside two healthy
# ones, which the Lighthouse does not wait for:
#   RUN=4a NPROC0=4 NGROUPS=3 RESTARTS=4 JOIN_MS=5000 SECS=150 scripts/torchft_restart_race/run.sh
set -u
cd "$(dirname "$0")"
PY=${PY:-../../.venv/bin}
RUN=${RUN:-1}
NPROC0=${NPROC0:-2}
NGROUPS=${NGROUPS:-2}
RESTARTS=${RESTARTS:-2}
JOIN_MS=${JOIN_MS:-60000}
SECS=${SECS:-55}
"$PY/python" lh.py $((SECS + 5)) "$JOIN_MS" > lh.$RUN.log 2>&1 &
LH=$!
sleep 2
export TORCHFT_LIGHTHOUSE=http://127.0.0.1:29510
PIDS=()
for g in $(seq 0 $((NGROUPS - 1))); do
  n=2; [ "$g" = 0 ] && n=$NPROC0
  REPLICA_GROUP_ID=$g timeout "$SECS" "$PY/torchrun" --master_port=$((29600+g)) --nnodes=1 \
    --nproc_per_node=$n --max_restarts=$RESTARTS --monitor_interval=0.1 train.py \
    > g$g.$RUN.log 2>&1 &
  PIDS+=($!)
done
wait "${PIDS[@]}" 2>/dev/null
kill $LH 2>/dev/null
wait
