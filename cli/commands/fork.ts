import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { Redactor, redactTrace } from '../../engine/index.ts'
import { traceDigest } from '../../store/index.ts'
import {
  assertTraceName,
  ErrorCodes,
  forkTraceWithNotes,
  type PatchSpec,
  parsePatchSpec,
  resolvePatches,
  resolvePatchFile,
  ToolReplayError,
} from '../../trace/index.ts'
import { withExistingStore } from '../open-store.ts'
import { redactedNote, redactionFromArgs, redactionOptions } from '../redaction-flags.ts'
import type { CommandModule } from './command.ts'

/** `tr-proxy fork SOURCE --to BRANCH --patch SPEC...`: a new trace with patched outcomes and lineage. */
export const forkCommand: CommandModule = {
  command: 'fork <source>',
  describe:
    'Fork a trace: copy it as BRANCH with patched responses (JSON path, body, status, header, error, or a model answer by meaning); the source is untouched',
  builder: (y) =>
    redactionOptions(y)
      .positional('source', { type: 'string', describe: 'Trace to fork' })
      .option('to', { type: 'string', demandOption: true, describe: 'Name of the new trace (the branch)' })
      .option('patch', {
        type: 'string',
        array: true,
        demandOption: true,
        describe:
          'Patch "SELECTOR ACTION", repeatable. SELECTOR: #SEQ or "METHOD URL [#OCCURRENCE]". ACTION: $.path=JSON, body=@FILE, status=CODE, header:NAME=VALUE, header:NAME (remove), error=CODE[@PHASE], response=CODE; on a model call: llm.output_text="TEXT", llm.tool_call[N].name=NAME, llm.tool_call[N].arguments=JSON, llm.finish=VALUE; on an OpenAI Realtime session: realtime.response[N].output_text="TEXT", realtime.response[N].tool_call[M].arguments=JSON; on a WebSocket session: fault=ws_close@N[:CODE], fault=ws_drop@N, fault=ws_delay@N[:MS]',
      })
      .option('force', { type: 'boolean', default: false, describe: 'Replace an existing trace named BRANCH' })
      .example('$0 fork main --to inactive --patch "#0 $.active=false"', 'Set a field of the first response')
      .example('$0 fork main --to flaky --patch "GET https://crm.test/customers/42 #0 error=ECONNRESET"', 'Make a request fail')
      .example('$0 fork agent --to review --patch \'#5 llm.output_text="manual_review"\'', "Change a model's answer (streams are re-encoded)"),
  run: async (args, io) => {
    const specs = (args.patch as string[]).map((s) => parsePatchSpec(s))
    // Files are read before the store opens: a missing file must fail the fork before anything is written.
    const resolved: PatchSpec[] = []
    for (const spec of specs) {
      if (spec.action.kind !== 'body-file') {
        resolved.push(spec)
        continue
      }
      const file = resolve(spec.action.file)
      let bytes: Uint8Array
      try {
        bytes = new Uint8Array(await readFile(file))
      } catch (err) {
        throw new ToolReplayError(
          ErrorCodes.INVALID_PATCH,
          `Failed to read the body file of patch "${spec.text}": ${(err as Error).message}. Check the path after "body=@".`,
          {
            cause: err,
          },
        )
      }
      resolved.push(resolvePatchFile(spec, bytes))
    }
    const to = String(args.to)
    assertTraceName(to, '--to trace name')
    const redactor = new Redactor(await redactionFromArgs(args))
    return withExistingStore({ store: args.store }, async (store) => {
      const source = await store.readTrace(String(args.source))
      if (!args.force && (await store.hasTrace(to))) {
        throw new ToolReplayError(
          ErrorCodes.TRACE_EXISTS,
          `Cannot fork "${source.meta.name}" to "${to}": a trace with that name exists. Pick another name or pass --force.`,
        )
      }
      const forked = forkTraceWithNotes(source, { name: to, sourceDigest: traceDigest(source), patches: resolved })
      const { notes } = forked
      // A patch (a body file, a JSON value) is new content: the branch is redacted like a recording.
      const { trace: branch, changed } = redactTrace(forked.trace, redactor)
      await store.putTrace(branch, { overwrite: Boolean(args.force) })
      const applied = resolvePatches(source, resolved)
      if (args.json) {
        io.out(
          JSON.stringify({
            ok: true,
            source: source.meta.name,
            branch: to,
            lineage: branch.meta.lineage,
            redacted: changed,
            patches: applied.map((p) => ({
              id: p.id,
              spec: p.spec,
              seq: p.seq,
              notes: notes.filter((n) => n.id === p.id && n.seq === p.seq).map((n) => n.note),
            })),
          }),
        )
      } else {
        const lines = [
          `Forked "${source.meta.name}" to "${to}" (${branch.exchanges.length} exchange${branch.exchanges.length === 1 ? '' : 's'}, ${applied.length} patch${applied.length === 1 ? '' : 'es'}):`,
        ]
        for (const p of applied) {
          lines.push(`  ${p.id}  exchange #${p.seq}  ${p.spec}`)
          // What the patch adjusted to keep the exchange coherent (a dropped encoding, a fixed length, a cut body).
          for (const n of notes) if (n.id === p.id && n.seq === p.seq) lines.push(`      ${n.note}`)
        }
        io.out(`${lines.join('\n')}${redactedNote(changed)}`)
      }
      return 0
    })
  },
}
