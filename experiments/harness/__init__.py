"""What every experiment shares, written once: import it as `experiments.harness`.

- `benchmarks`: where LoCoMo, LongMemEval and Vaswani are read (`--locomo`,
  `--longmemeval`, `--vaswani`, defaulting to ../shared/data, a missing one refused in one
  line), the chat benchmarks loaded as conversations, LongMemEval's development subset.
- `chats`: LoCoMo's conversations as raw chat logs (turns and photo captions) and in a
  messaging form (each turn sent as the messages a person would type), with the shape
  statistics a real chat is compared on.
- `folds`: the folds (LoCoMo's conversations, LongMemEval's questions dealt into seven
  groups) and the leave-one-out protocol: each fold scored by what was chosen on the others.
- `gate`: the forced-answer spec, the standout ratio and the threshold rule the gate's
  experiments choose by, and foreign negatives placed in their store's fold.
- `timing`: one clock, interleaved rounds against a reference in the same process, one
  percentile definition (numpy's linear interpolation between closest ranks), peak memory.
- `results`: a JSON writer that records the commit and the machine (processor model, the
  instruction-set extensions that choose kernels, cores) beside the figures.
- `stories`: the generated stories at a size and their cases, made once per work folder.

An experiment imports the harness and the garden's public names, never another experiment
and never a name the garden keeps private (`_x`, or a module `garden/**/_x.py`).
"""
