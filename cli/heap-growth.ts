import { setFlagsFromString } from 'node:v8'

/**
 * For the commands that stream a trace of any length (import, export, assets): after each full collection the
 * heap may grow to 1.5 times what is live, where V8's own factor (up to 4 for a process that allocates fast,
 * as these do: an exchange's objects are garbage a moment later) let a streamed import hold two to three times
 * its live heap. Memory then follows what the command holds, at the cost of more frequent collections.
 *
 * @note A V8 flag set while the process runs: V8 reads it each time it sets the next heap limit, so it takes
 * effect from the next full collection. The CLI process runs one command; a process that calls runCli more
 * than once (tests) keeps the setting, which changes when memory is collected, never what a command does.
 */
export function boundHeapGrowth(): void {
  setFlagsFromString('--heap-growing-percent=50')
}
