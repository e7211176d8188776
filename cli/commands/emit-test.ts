import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { type CaseExpectation, type CaseFramework, emitCase, FRAMEWORKS } from '../../cases/index.ts'
import { readTraceFile } from '../../store/index.ts'
import { ErrorCodes, parseJson, ToolReplayError, type Trace } from '../../trace/index.ts'
import { withReadOnlyStore } from '../open-store.ts'
import type { Args, CommandModule } from './command.ts'

/** `tr-proxy emit-test TRACE --out DIR --name NAME`: promote a trace to a self-contained regression case. */
export const emitTestCommand: CommandModule = {
  command: 'emit-test <trace>',
  describe: 'Promote a trace (e.g. a fork) to a self-contained regression case: manifest, trace file, generated test',
  builder: (y) =>
    y
      .positional('trace', { type: 'string', describe: 'Trace name in the store, or a .json trace file' })
      .option('out', { type: 'string', demandOption: true, describe: 'Directory to create the case directory in' })
      .option('name', { type: 'string', demandOption: true, describe: 'Case name (directory and test name)' })
      .option('runner', { type: 'string', describe: 'Library runner MODULE#EXPORT: a function that exercises the app (e.g. src/app.ts#decideCustomer42)' })
      .option('expect-json', { type: 'string', describe: 'Expected return value of the runner, as JSON (e.g. \'"rejected"\')' })
      .option('expect-file', { type: 'string', describe: 'File holding the expected return value of the runner, as JSON' })
      .option('command', { type: 'string', describe: 'Command case: the command to run under the proxy (split on spaces; use -- ARGV... for exact argv)' })
      .option('cwd', { type: 'string', describe: 'Command case: directory the command runs in (default: the current directory); kept relative to the case' })
      .option('expect-exit-code', { type: 'number', describe: 'Command case: expected exit code' })
      .option('expect-stdout', { type: 'string', describe: 'Command case: expected stdout (one trailing newline of the output does not count)' })
      .option('expect-stdout-file', { type: 'string', describe: 'Command case: a file holding the exact expected stdout, every byte significant' })
      .option('framework', { choices: FRAMEWORKS, default: 'node' as CaseFramework, describe: 'Test framework of the generated test' })
      .option('import-from', { type: 'string', describe: 'Module the generated test imports verifyCase from (default tool-replay/cases)' })
      .option('verify', { type: 'boolean', default: true, describe: 'Verify the staged case before publishing (--no-verify skips)' })
      .example('$0 emit-test crm-inactive --out test/cases --name crm-rejected --runner src/app.ts#decideCustomer42 --expect-json \'"rejected"\'', ''),
  run: async (args, io) => {
    const trace = await loadTrace(args, String(args.trace))
    const runnerSpec = typeof args.runner === 'string' ? args.runner : undefined
    const commandArgv = commandOf(args)
    let expect: CaseExpectation
    if (runnerSpec !== undefined) expect = { json: await expectedJson(args) }
    else {
      const e: { exitCode?: number; stdout?: string; stdoutExact?: string } = {}
      if (typeof args['expect-exit-code'] === 'number') e.exitCode = args['expect-exit-code']
      if (typeof args['expect-stdout'] === 'string') e.stdout = args['expect-stdout']
      if (typeof args['expect-stdout-file'] === 'string') {
        if (e.stdout !== undefined) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'Give --expect-stdout or --expect-stdout-file, not both.')
        e.stdoutExact = await readExactFile(String(args['expect-stdout-file']))
      }
      expect = e
    }
    let runner: { module: string; export: string } | undefined
    if (runnerSpec !== undefined) {
      const hash = runnerSpec.lastIndexOf('#')
      if (hash <= 0 || hash === runnerSpec.length - 1)
        throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid --runner "${runnerSpec}": write MODULE#EXPORT, e.g. src/app.ts#decideCustomer42.`)
      runner = { module: runnerSpec.slice(0, hash), export: runnerSpec.slice(hash + 1) }
      if (!existsSync(resolve(runner.module))) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Runner module ${resolve(runner.module)} does not exist.`)
    }
    const emitted = await emitCase({
      trace,
      out: String(args.out),
      name: String(args.name),
      expect,
      framework: args.framework as CaseFramework,
      verify: args.verify !== false,
      ...(runner ? { runner } : {}),
      ...(commandArgv ? { command: { argv: commandArgv, ...(typeof args.cwd === 'string' ? { cwd: args.cwd } : {}) } } : {}),
      ...(typeof args['import-from'] === 'string' ? { importFrom: args['import-from'] } : {}),
    })
    if (args.json) io.out(JSON.stringify({ ok: true, dir: emitted.dir, manifest: emitted.manifest, verified: emitted.verified !== undefined }))
    else {
      io.out(
        [
          `Emitted case "${emitted.manifest.name}" to ${emitted.dir}${emitted.verified ? ` (verified: ${emitted.verified.summary.replayed} exchange(s) replayed, expectation met)` : ' (not verified)'}`,
          `  ${emitted.manifest.trace.file}  ${emitted.manifest.test.file}  manifest.json`,
          `Run it with \`tr-proxy verify ${emitted.dir}\` or your test runner.`,
        ].join('\n'),
      )
    }
    return 0
  },
}

function commandOf(args: Args): string[] | undefined {
  // After `--`: yargs keeps it in `_` after the command name (or in '--' when populate-- is on).
  const rest = (args['--'] ?? args._.slice(1)).map(String)
  if (typeof args.command === 'string') return args.command.split(/\s+/).filter(Boolean)
  return rest.length > 0 ? rest : undefined
}

async function readExactFile(file: string): Promise<string> {
  try {
    return await readFile(resolve(file), 'utf8')
  } catch (err) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Cannot read --expect-stdout-file ${file}: ${(err as Error).message}.`)
  }
}

async function expectedJson(args: Args): Promise<unknown> {
  const inline = args['expect-json']
  const file = args['expect-file']
  if ((typeof inline === 'string') === (typeof file === 'string')) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      'A runner case needs its expected return value: give exactly one of --expect-json JSON or --expect-file FILE.',
    )
  }
  const text = typeof inline === 'string' ? inline : await readFile(resolve(String(file)), 'utf8')
  try {
    return parseJson(text)
  } catch (err) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `The expected value is not JSON (${(err as Error).message}). Strings need quotes: --expect-json '"rejected"'.`,
    )
  }
}

async function loadTrace(args: Args, name: string): Promise<Trace> {
  if (name.endsWith('.json') && existsSync(name)) return readTraceFile(resolve(name))
  return withReadOnlyStore({ store: args.store }, (store) => store.readTrace(name))
}
