/**
 * `tool-replay/cli`, the public entry: the command line run in-process (`runCli(argv)` resolves with the
 * exit code), and the one table that maps error codes to exit codes. The folder's door is `./index.ts`;
 * what is exported here is a decision, pinned by e2e/public-surface.test.ts.
 */

export { EXIT_CODES, exitCodeFor, runCli } from './index.ts'
