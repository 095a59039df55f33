#!/usr/bin/env bash
# The overlap probe (see README.md): run from the repository root, ~9 minutes on 2 cores, nothing else running.
P="env PYTHONPATH=. .venv/bin/python docs/bench/draft-probes/overlap.py"
one() { # CPUS ROLE THREADS: alone
  rm -f /tmp/overlap-go; taskset -c "$1" $P "$2" "$3" 12 > /tmp/overlap-a 2>&1 & p=$!
  until grep -q ready /tmp/overlap-a; do sleep 1; done; touch /tmp/overlap-go; wait $p; tail -1 /tmp/overlap-a; }
two() { # ROLE_A ROLE_B: together, one core each
  rm -f /tmp/overlap-go; taskset -c 0 $P "$1" 1 12 > /tmp/overlap-a 2>&1 & a=$!
  taskset -c 1 $P "$2" 1 12 > /tmp/overlap-b 2>&1 & b=$!
  until grep -q ready /tmp/overlap-a && grep -q ready /tmp/overlap-b; do sleep 1; done
  touch /tmp/overlap-go; wait $a $b; echo "together:"; tail -1 /tmp/overlap-a; tail -1 /tmp/overlap-b; }
for rep in 1 2; do
  one 0,1 target1 2; one 0,1 target4 2; one 0,1 draft 2
  one 0 target1 1; one 0 target4 1; one 1 draft 1
  two target4 draft; two target1 draft
done
