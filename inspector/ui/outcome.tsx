/** The application's outcome: the command, its exit code and the end of its output. */
import { shellLine } from './format.ts'
import type { AppRun, RunAgainst } from './types.ts'

/**
 * One app outcome; `testId` marks it for the browser tests; `runs`: the runs of the app against this trace;
 * `testRunner`: the run was recorded by a test setup (it keeps the command, its process was still running).
 */
export function Outcome({
  app,
  testId,
  runs = [],
  testRunner,
}: {
  app: AppRun | undefined
  testId?: string
  runs?: RunAgainst[]
  testRunner?: string | undefined
}) {
  if (!app)
    return (
      <div class="outcome muted" data-testid={testId}>
        No application outcome: this run was not made with <code>tr-proxy record|replay -- &lt;command&gt;</code>.
      </div>
    )
  const e = app.exit
  return (
    <div class="outcome" data-testid={testId}>
      <div>
        <b>app</b> <code>{shellLine(app.command)}</code>
        {app.cwd && <span class="muted"> in {app.cwd}</span>}
      </div>
      {e ? (
        <>
          <div data-testid={testId && `${testId}-exit`} class={e.code === 0 ? 'ok' : 'bad'}>
            exit {e.code}
            {e.signal ? ` (${e.signal})` : ''}
          </div>
          <Tail name="stdout" tail={e.stdout} testId={testId && `${testId}-stdout`} />
          <Tail name="stderr" tail={e.stderr} />
        </>
      ) : (
        <div class="muted">
          {testRunner !== undefined && runs.length === 0 ? (
            `Recorded by the ${testRunner} test setup: it keeps the command that runs this test file again, not its exit code (the file was still running when the trace closed). Rerun it to see one.`
          ) : runs.length === 0 ? (
            'Not run against this trace yet (a fork keeps the command of its source): rerun it.'
          ) : (
            <>
              This trace keeps the command, not an outcome (a fork); the app ran against it in{' '}
              {runs.map((r, i) => (
                <span key={r.name}>
                  {i > 0 ? ', ' : ''}
                  <a href={`#/run/${encodeURIComponent(r.name)}`}>{r.name}</a>
                  {r.exit !== undefined ? ` (app exit ${r.exit})` : ''}
                </span>
              ))}
              .
            </>
          )}
        </div>
      )}
    </div>
  )
}

function Tail({ name, tail, testId }: { name: string; tail: { text: string; bytes: number }; testId?: string | undefined }) {
  return (
    <div>
      <div class="muted">
        {name}: {tail.bytes === 0 ? '(empty)' : `${tail.bytes} bytes`}
      </div>
      {tail.text !== '' && (
        <pre class="tail" data-testid={testId}>
          {tail.text}
        </pre>
      )}
    </div>
  )
}
