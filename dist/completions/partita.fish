# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_partita_global_optspecs
    string join \n h/help V/version
end

function __fish_partita_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_partita_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_partita_using_subcommand
    set -l cmd (__fish_partita_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c partita -n "__fish_partita_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c partita -n "__fish_partita_needs_command" -s V -l version -d 'Print version'
complete -c partita -n "__fish_partita_needs_command" -f -a "serve" -d 'Run the manager daemon (system mode as root, else user mode)'
complete -c partita -n "__fish_partita_needs_command" -f -a "status" -d 'Show the manager\'s CPUs, partitions and applications'
complete -c partita -n "__fish_partita_needs_command" -f -a "top" -d 'A live view of partitions and applications (`q` quits; `--once` prints one frame)'
complete -c partita -n "__fish_partita_needs_command" -f -a "run" -d 'Start a program under the manager: confined to a partition, or a build whose jobs follow its allocation (--jobserver), or sized from it at start (--threads-env)'
complete -c partita -n "__fish_partita_needs_command" -f -a "calibrate" -d 'Measure sustained memory bandwidth (a STREAM-like triad) and store it as the bandwidth policy\'s capacity'
complete -c partita -n "__fish_partita_needs_command" -f -a "simulate" -d 'Run the models: bandwidth-aware co-scheduling (Antonopoulos), allocation policies over time, NUMA page migration'
complete -c partita -n "__fish_partita_needs_command" -f -a "completions" -d 'Print the completion script for a shell (bash, zsh, fish, elvish, powershell)'
complete -c partita -n "__fish_partita_needs_command" -f -a "man" -d 'Print the manual page (or write every page with --dir)'
complete -c partita -n "__fish_partita_needs_command" -f -a "demo" -d 'Run a multiprogrammed workload with and without process control, and report'
complete -c partita -n "__fish_partita_needs_command" -f -a "workload" -d 'Run one workload application of the demo on its own (used by `demo` to start real separate processes; also useful by hand)'
complete -c partita -n "__fish_partita_needs_command" -f -a "probe" -d 'A small program built on partita-runtime, for the manager\'s tests and benchmarks'
complete -c partita -n "__fish_partita_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c partita -n "__fish_partita_using_subcommand serve" -l config -d 'Configuration file (TOML); without one, /etc/partita/partita.toml if it exists, else the defaults' -r -F
complete -c partita -n "__fish_partita_using_subcommand serve" -l socket -d 'Socket path (default: /run/partita/partita.sock as root, else $XDG_RUNTIME_DIR/partita.sock; PARTITA_SOCKET overrides)' -r -F
complete -c partita -n "__fish_partita_using_subcommand serve" -l log-format -d 'Log format on stderr: `text` for people, `json` (one object per line) for collectors' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line (timestamp, level, target, fields)'"
complete -c partita -n "__fish_partita_using_subcommand serve" -l metrics -d 'Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks a free port, logged as `metrics listening on ADDR`). Loopback addresses only, unless --metrics-public' -r
complete -c partita -n "__fish_partita_using_subcommand serve" -l metrics-public -d 'Allow --metrics on a non-loopback address (the endpoint has no authentication)'
complete -c partita -n "__fish_partita_using_subcommand serve" -l cleanup -d 'Do not serve: undo what managers that died without cleaning up left (affinities from their journals next to the socket, cgroups, `+cpuset`), print a summary and exit. A starting manager does the same first'
complete -c partita -n "__fish_partita_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c partita -n "__fish_partita_using_subcommand status" -l socket -d 'Socket path (default: where applications look: PARTITA_SOCKET, else $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock)' -r -F
complete -c partita -n "__fish_partita_using_subcommand status" -l json -d 'Print JSON instead of tables'
complete -c partita -n "__fish_partita_using_subcommand status" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand top" -l socket -d 'Socket path (default: where applications look: PARTITA_SOCKET, else $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock)' -r -F
complete -c partita -n "__fish_partita_using_subcommand top" -l interval-ms -d 'Refresh period, milliseconds (at most 500: at least two refreshes a second)' -r
complete -c partita -n "__fish_partita_using_subcommand top" -l once -d 'Print one frame as text and exit (size: the terminal\'s, else $COLUMNS x $LINES, else 120x40)'
complete -c partita -n "__fish_partita_using_subcommand top" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand run" -l partition -d 'Partition to run in (default: the default partition)' -r
complete -c partita -n "__fish_partita_using_subcommand run" -l socket -d 'Socket path (default: where applications look: PARTITA_SOCKET, else $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock)' -r -F
complete -c partita -n "__fish_partita_using_subcommand run" -s j -l jobs -d 'With --jobserver: most jobs at once (default: make\'s own -jN, else the CPUs available)' -r
complete -c partita -n "__fish_partita_using_subcommand run" -l fifo -d 'With --jobserver: the fifo path (must not exist; default: a fresh one)' -r -F
complete -c partita -n "__fish_partita_using_subcommand run" -l jobserver-style -d 'With --jobserver: how the jobserver is announced to the build' -r -f -a "auto\t'`fifo` when the `make` on `PATH` is GNU make ≥ 4.4 (or there is no make), else `pipe`'
fifo\t'`--jobserver-auth=fifo:PATH` (make ≥ 4.4, cargo, rustc, ninja ≥ 1.13)'
pipe\t'`--jobserver-auth=R,W` and `--jobserver-fds=R,W` with inherited descriptors (any make)'"
complete -c partita -n "__fish_partita_using_subcommand run" -l jobserver -d 'Serve a GNU make jobserver (MAKEFLAGS / CARGO_MAKEFLAGS) whose tokens follow the build\'s allocation'
complete -c partita -n "__fish_partita_using_subcommand run" -l threads-env -d 'Set OMP_NUM_THREADS, RAYON_NUM_THREADS and similar from the allocation at start'
complete -c partita -n "__fish_partita_using_subcommand run" -l no-confine -d 'With --jobserver: do not set the build\'s CPU affinity to the allocated CPUs'
complete -c partita -n "__fish_partita_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c partita -n "__fish_partita_using_subcommand calibrate" -l threads -d 'Threads, each pinned to one CPU (default: every CPU this process may use)' -r
complete -c partita -n "__fish_partita_using_subcommand calibrate" -l array-mib -d 'MiB per array (three arrays); default: 4 × the last-level cache, at least 32 MiB' -r
complete -c partita -n "__fish_partita_using_subcommand calibrate" -l reps -d 'Timed repetitions (the best is stored, as STREAM reports)' -r
complete -c partita -n "__fish_partita_using_subcommand calibrate" -l state-file -d 'State file (default: `partita_numa::triad::default_state_path`)' -r -F
complete -c partita -n "__fish_partita_using_subcommand calibrate" -l dry-run -d 'Print only; do not store'
complete -c partita -n "__fish_partita_using_subcommand calibrate" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand simulate" -l svg-dir -d 'Directory for the SVG charts (created); none written when absent' -r -F
complete -c partita -n "__fish_partita_using_subcommand simulate" -l seeds -d 'Seeds averaged per Fig. 2 cell (the OS\'s random choices and the bursts)' -r
complete -c partita -n "__fish_partita_using_subcommand simulate" -l work-s -d 'Work of each application instance, seconds of unloaded execution' -r
complete -c partita -n "__fish_partita_using_subcommand simulate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c partita -n "__fish_partita_using_subcommand completions" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand man" -l dir -d 'Write `partita.1` and one page per subcommand (`partita-serve.1`, …) into this directory instead of printing `partita.1`' -r -F
complete -c partita -n "__fish_partita_using_subcommand man" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand demo" -l apps -d 'Applications of the mix, comma-separated (ocean, mp3d, cholesky, water, locus, pmake, hog, sleeper; repeat a name to run it twice). Overrides --mix' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l mix -d 'Named mix: `default` (locus, ocean, mp3d, cholesky, water: Tucker\'s LOMCW), `barrier` (ocean, mp3d, ocean, mp3d), `fine` (water, cholesky, locus, water: fork-join and task parallelism), `pmake` (locus, ocean, pmake: Tucker\'s LOP)' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l scale -d 'Problem-size multiplier (1.0: each application takes roughly half a second alone)' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l repeat -d 'Run every mode N times and report medians' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l out -d 'Where report.md, results.json and the SVG charts go' -r -F
complete -c partita -n "__fish_partita_using_subcommand demo" -l modes -d 'Modes to run, comma-separated (uncontrolled, partitioned, process-control, batch)' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l threads -d 'Workers per application (default: the CPUs this process may use)' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l spin-us -d 'How long barriers spin before blocking, µs' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l scenario -d 'An additional experiment instead of the mix in every mode: `staggered`, `hog`, `sleeper`, `three`' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l stagger -d 'Seconds between arrivals in the staggered scenario' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l realloc-ms -d 'Manager reallocation period, ms (Tucker: 300)' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -l timeout -d 'Stop a mode that runs longer than this, seconds' -r
complete -c partita -n "__fish_partita_using_subcommand demo" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand workload" -l threads -d 'Workers (pmake: concurrent unit processes). Default: the CPUs this process may use' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l scale -d 'Problem-size multiplier' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l spin-us -d 'How long barriers spin before blocking, µs' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l seconds -d 'Run time of hog and sleeper, seconds' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l expect -d 'The reference checksum; without it the sequential reference is computed after the run' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l name-label -d 'Label shown in logs' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l unit -d 'pmake-unit: the unit index' -r
complete -c partita -n "__fish_partita_using_subcommand workload" -l dir -d 'pmake-unit: the scratch directory' -r -F
complete -c partita -n "__fish_partita_using_subcommand workload" -l json -d 'Print the result as one JSON line'
complete -c partita -n "__fish_partita_using_subcommand workload" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand probe" -l socket -d 'Manager socket (default: what the runtime would use)' -r -F
complete -c partita -n "__fish_partita_using_subcommand probe" -l name -d 'Application name' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l pool -d 'Pool size announced' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l demand -d 'Demand reported' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l partition -d 'Partition hint' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l seconds -d 'Exit after this many seconds (0: never; `--raw` also exits when the manager goes away)' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l poll-us -d 'How often the main thread looks at the pool\'s active workers, in microseconds' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l task-us -d 'Length of each spinning task of the workload, in microseconds (a worker reaches a safe point, where it can park, only between tasks)' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l churn-threads-ms -d 'Also create threads of its own after registering, one after another, each of which pins itself back to the mask the probe started with and lives this many milliseconds (0: ends at once, a tight create-and-end loop); at most 8 live at a time. It stands for an application whose later threads would escape its allocation' -r
complete -c partita -n "__fish_partita_using_subcommand probe" -l raw -d 'Speak the protocol directly instead of using a pool'
complete -c partita -n "__fish_partita_using_subcommand probe" -s h -l help -d 'Print help'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "serve" -d 'Run the manager daemon (system mode as root, else user mode)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "status" -d 'Show the manager\'s CPUs, partitions and applications'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "top" -d 'A live view of partitions and applications (`q` quits; `--once` prints one frame)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "run" -d 'Start a program under the manager: confined to a partition, or a build whose jobs follow its allocation (--jobserver), or sized from it at start (--threads-env)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "calibrate" -d 'Measure sustained memory bandwidth (a STREAM-like triad) and store it as the bandwidth policy\'s capacity'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "simulate" -d 'Run the models: bandwidth-aware co-scheduling (Antonopoulos), allocation policies over time, NUMA page migration'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "completions" -d 'Print the completion script for a shell (bash, zsh, fish, elvish, powershell)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "man" -d 'Print the manual page (or write every page with --dir)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "demo" -d 'Run a multiprogrammed workload with and without process control, and report'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "workload" -d 'Run one workload application of the demo on its own (used by `demo` to start real separate processes; also useful by hand)'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "probe" -d 'A small program built on partita-runtime, for the manager\'s tests and benchmarks'
complete -c partita -n "__fish_partita_using_subcommand help; and not __fish_seen_subcommand_from serve status top run calibrate simulate completions man demo workload probe help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
