"""The static protocol: the smallest real elastic protocol, proving the seam.

A store-based rendezvous per round (ranks from sorted host names, min/max hosts, a last
call), a state sync from the member with the most committed progress, and a training loop
with an allreduce per step and a commit every k steps. On a collective failure survivors
restore their last commit and re-rendezvous in the next round, without the lost host; hosts
waiting for a round are admitted at the next commit.
"""
