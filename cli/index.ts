/** The command-line interface, for embedding and tests. */
export { runCli } from './main.ts'
export { EXIT_CODES, exitCodeFor } from './exit-codes.ts'
