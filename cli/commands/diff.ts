import { DIFF_OPTIONS, diffTraces, diffTracesLlm, formatDiffText, formatLlmDiffText, llmView, optionsFromFlags, type Trace } from '../../trace/index.ts'
import { declareOptions } from '../declared-options.ts'
import { withTraceLoader } from '../trace-args.ts'
import type { CommandModule } from './command.ts'

/** Exit code of `diff --exit-code` when the traces differ (as `git diff --exit-code` and diff(1)). */
export const DIFF_EXIT_DIFFERENT = 1

/** `tr-proxy diff A B`: what changed between two traces, first observable divergence first. */
export const diffCommand: CommandModule = {
  command: 'diff <a> <b>',
  describe: 'Compare two traces (names in the store, or trace files): the first observable divergence, then every difference',
  builder: (y) =>
    declareOptions(y, DIFF_OPTIONS)
      .positional('a', { type: 'string', describe: 'Trace A (before): a name in the store or a .json trace file' })
      .positional('b', { type: 'string', describe: 'Trace B (after)' })
      .option('format', { choices: ['text', 'json'] as const, default: 'text', describe: 'Output: deterministic text, or versioned JSON' })
      .option('view', {
        choices: ['llm', 'http'] as const,
        describe: 'llm: differences on model calls in model terms (the default when either trace has any); http: every HTTP difference',
      })
      .option('exit-code', {
        type: 'boolean',
        default: false,
        describe: `Exit ${DIFF_EXIT_DIFFERENT} when the traces differ (for CI); default exit 0 either way`,
      }),
  run: async (args, io) =>
    withTraceLoader({ store: args.store }, [String(args.a), String(args.b)], async (load) => {
      const a = await load(String(args.a))
      const b = await load(String(args.b))
      const options = optionsFromFlags(DIFF_OPTIONS, args)
      const view = (args.view as 'llm' | 'http' | undefined) ?? (hasModelTurn(a) || hasModelTurn(b) ? 'llm' : 'http')
      const json = args.format === 'json' || Boolean(args.json)
      if (view === 'llm') {
        const diff = diffTracesLlm(a, b, options)
        io.out(json ? JSON.stringify(diff, null, 2) : formatLlmDiffText(diff))
        return args['exit-code'] && !diff.equal ? DIFF_EXIT_DIFFERENT : 0
      }
      const diff = diffTraces(a, b, options)
      io.out(json ? JSON.stringify(diff, null, 2) : formatDiffText(diff))
      return args['exit-code'] && !diff.equal ? DIFF_EXIT_DIFFERENT : 0
    }),
}

const hasModelTurn = (t: Trace) => t.exchanges.some((x) => llmView(t, x) !== undefined)
