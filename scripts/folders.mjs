/**
 * The package's folders, declared once: the floors of the layer check (scripts/check-layers.mjs), the unit
 * test folders (scripts/run-tests.mjs), the packed tarball's cache key (e2e/support/packed-package.ts), and the
 * sources tsconfig.json and tsconfig.build.json compile and the Dockerfile copies (checked by the layer check).
 * Plain data with no imports: the test runner reads it at start.
 */

/** The floors, lowest first: a folder may import the folders of lower floors only (same floor: not each other). */
export const FLOORS = [
  ['trace'], // the model; no I/O
  ['store'], // persistence
  ['faults'], // faults at the HTTP boundary: rules and seed, the planner's decisions, coverage, commit evidence, contracts
  ['engine'], // a record or replay session: matching, occurrence, ledger, redaction, the session's fault host
  ['capture'], // the life of one captured request, once for every path
  ['seal'], // sealed runs, the OS side: namespaces, DNS, connection tracking (the proxy serves what arrives)
  ['interceptor', 'proxy', 'mcp', 'interop'], // the capture paths, and conversions to other formats
  ['setup'], // the ready-made test setups (node:test, vitest) around the interceptor and a shared proxy's sessions
  ['cases', 'assets', 'lab'], // regression cases; shared recordings in a git assets repository; the fault lab (the CLI's `demo`)
  ['inspector'], // `tr-proxy inspect`: the evidence console over traces, cases and the lab
  ['cli'], // the yargs commands
]

/** The package's source folders, lowest floor first. */
export const PACKAGE_FOLDERS = FLOORS.flat()

/** Top-level folders that are not part of the package: tests, benchmarks, examples and tooling may import anything. */
export const OUTSIDE = ['bench', 'bin', 'dist', 'e2e', 'examples', 'node_modules', 'scripts']

/** Outside folders that hold type-checked code and unit tests of their own. */
export const CHECKED_OUTSIDE = ['e2e', 'bench', 'examples', 'scripts']
