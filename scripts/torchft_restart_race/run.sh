#!/bin/bash
# The real components behind scenarios/torchft/restarted_rank_reads_old_manager_address:
# torchft 0.2.0's Lighthouse and two replica groups of 2 ranks, each under torchrun
# --max_restarts=2 (torchx hsdp's shape), on Gloo; group 0's rank 0 SIGKILLs itself at
# step 10. Each run takes about a minute; its logs are g<group>.<run>.log here.
#   RUN=1 scripts/torchft_restart_race/run.sh && python3 scripts/torchft_restart_race/tally.py 1
set -u
cd "$(dirname "$0")"
PY=${PY:-../../.venv/bin}
RUN=${RUN:-1}
"$PY/python" lh.py 60 > lh.$RUN.log 2>&1 &
LH=$!
sleep 2
export TORCHFT_LIGHTHOUSE=http://127.0.0.1:29510
for g in 0 1; do
  REPLICA_GROUP_ID=$g timeout 55 "$PY/torchrun" --master_port=$((29600+g)) --nnodes=1 \
    --nproc_per_node=2 --max_restarts=2 --monitor_interval=0.1 train.py > g$g.$RUN.log 2>&1 &
done
wait %2 %3 2>/dev/null
kill $LH 2>/dev/null
wait
