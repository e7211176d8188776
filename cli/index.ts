/** The command-line interface, for embedding and tests. */

export { EXIT_CODES, exitCodeFor } from './exit-codes.ts'
export { runCli } from './main.ts'
