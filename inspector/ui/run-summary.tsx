/**
 * A run in totals (by model, by tool, by MCP server) and its waterfall: every exchange as a bar on a time
 * axis, from its start to its last chunk (the part before the response head lighter), packed into lanes so that
 * exchanges in flight at once sit one above the other. Bars are drawn on a canvas (a 10,000-exchange run is one
 * drawing); the axis, the legend and the peak are text.
 */
import { useEffect, useRef, useState } from 'preact/hooks'
import { bytes, ms } from './format.ts'
import type { Run, RunSummary, WaterfallBar } from './types.ts'
import { AppExit, VerdictBadge } from './verdict.tsx'

const KINDS = ['HTTP', 'model', 'tool'] as const

/** The summary view. */
export function SummaryView({ run, s }: { run: Run; s: RunSummary }) {
  const n = (x: number) => x.toLocaleString('en-US')
  return (
    <section class="summary" data-testid="run-summary">
      <p class="facts" data-testid="summary-totals">
        <span>{n(s.exchanges)} exchanges</span>
        <span class={s.errors > 0 ? 'bad' : ''}>{n(s.errors)} errors</span>
        <span>{n(s.faults)} faults</span>
        {s.live > 0 && <span class="badge verdict-live">{n(s.live)} live</span>}
        <span>{ms(s.durationMs)} from the first request to the last chunk</span>
        <span>{bytes(run.size)}</span>
        <AppExit run={run} />
        <VerdictBadge v={run.stats?.replay} />
      </p>
      <h3>By model</h3>
      {s.models.length === 0 ? (
        <p class="muted">No model turns in this run.</p>
      ) : (
        <table data-testid="summary-models">
          <thead>
            <tr>
              <th>model</th>
              <th>calls</th>
              <th>input tokens</th>
              <th>output tokens</th>
              <th>cost (as reported)</th>
              <th>time to first token (median, streams)</th>
              <th>duration (median / total)</th>
              <th>errors</th>
            </tr>
          </thead>
          <tbody>
            {s.models.map((m) => (
              <tr key={m.model}>
                <td>{m.model}</td>
                <td>{n(m.calls)}</td>
                <td>{m.withUsage > 0 ? n(m.inputTokens) : '–'}</td>
                <td>{m.withUsage > 0 ? n(m.outputTokens) : '–'}</td>
                <td>{m.cost !== undefined ? m.cost.toFixed(6).replace(/0+$/, '').replace(/\.$/, '') : 'not reported'}</td>
                <td>{m.ttftMs !== undefined ? ms(m.ttftMs) : '–'}</td>
                <td>
                  {ms(m.medianMs)} / {ms(m.totalMs)}
                </td>
                <td class={m.errors > 0 ? 'bad' : ''}>{m.errors}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>By tool</h3>
      {s.tools.length === 0 ? (
        <p class="muted">No tool calls.</p>
      ) : (
        <table data-testid="summary-tools">
          <thead>
            <tr>
              <th>tool</th>
              <th>called by the model</th>
              <th>exchanges that ran it</th>
              <th>errors</th>
              <th>time</th>
            </tr>
          </thead>
          <tbody>
            {s.tools.map((t) => (
              <tr key={t.tool}>
                <td>{t.tool}</td>
                <td>{t.called}</td>
                <td>{t.runs}</td>
                <td class={t.errors > 0 ? 'bad' : ''}>{t.errors}</td>
                <td>{ms(t.totalMs)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>By MCP server</h3>
      {s.servers.length === 0 ? (
        <p class="muted">No MCP messages.</p>
      ) : (
        <table data-testid="summary-servers">
          <thead>
            <tr>
              <th>server</th>
              <th>transport</th>
              <th>messages</th>
              <th>tool calls</th>
              <th>errors</th>
              <th>time</th>
            </tr>
          </thead>
          <tbody>
            {s.servers.map((v) => (
              <tr key={v.server}>
                <td>{v.server}</td>
                <td>{v.transport}</td>
                <td>{v.calls}</td>
                <td>{v.toolCalls}</td>
                <td class={v.errors > 0 ? 'bad' : ''}>{v.errors}</td>
                <td>{ms(v.totalMs)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="muted small">Read once for this page (an index of the run's exchanges: {ms(s.indexMs)}).</p>
    </section>
  )
}

/** A step for about six ticks over `span` ms: 1, 2 or 5 times a power of ten. */
function tickStep(span: number): number {
  const raw = Math.max(span, 1) / 6
  const p = 10 ** Math.floor(Math.log10(raw))
  return [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw) ?? p * 10
}

/** The waterfall view; a click on a bar opens that exchange. */
export function WaterfallView({ s, onOpen }: { s: RunSummary; onOpen: (seq: number) => void }) {
  const box = useRef<HTMLDivElement>(null)
  const canvas = useRef<HTMLCanvasElement>(null)
  const [width, setWidth] = useState(900)
  const [hover, setHover] = useState<WaterfallBar | undefined>()
  const w = s.waterfall
  const span = Math.max(s.durationMs, 1)
  const laneH = w.lanes > 60 ? Math.max(3, Math.floor(720 / w.lanes)) : 14
  const height = Math.max(1, w.lanes) * laneH
  const byLane = useRef<WaterfallBar[][]>([])
  useEffect(() => {
    const lanes: WaterfallBar[][] = Array.from({ length: w.lanes }, () => [])
    for (const b of w.bars) lanes[b[4]]?.push(b)
    for (const l of lanes) l.sort((a, b) => a[1] - b[1])
    byLane.current = lanes
  }, [s])
  useEffect(() => {
    const el = box.current
    if (!el) return
    const observer = new ResizeObserver(() => setWidth(Math.max(200, el.clientWidth)))
    observer.observe(el)
    return () => observer.disconnect()
  }, [])
  useEffect(() => {
    const c = canvas.current
    const ctx = c?.getContext('2d')
    if (!c || !ctx) return
    const ratio = devicePixelRatio || 1
    c.width = width * ratio
    c.height = height * ratio
    ctx.scale(ratio, ratio)
    const css = getComputedStyle(c)
    const color = (v: string) => css.getPropertyValue(v).trim()
    const fills = [color('--wf-http'), color('--wf-model'), color('--wf-tool'), color('--wf-ws')]
    const x = (t: number) => (t / span) * width
    for (const [, start, headers, end, lane, kind, failed] of w.bars) {
      const y = lane * laneH + 1
      const h = Math.max(1, laneH - 2)
      ctx.fillStyle = color('--wf-wait')
      ctx.fillRect(x(start), y, Math.max(1, x(Math.min(headers, end))), h)
      ctx.fillStyle = failed ? color('--bad') : (fills[kind] ?? fills[0] ?? '#888')
      ctx.fillRect(x(start + Math.min(headers, end)), y, Math.max(1, x(end - Math.min(headers, end))), h)
    }
  }, [s, width, height])
  const at = (e: MouseEvent): WaterfallBar | undefined => {
    const rect = (e.target as HTMLCanvasElement).getBoundingClientRect()
    const t = ((e.clientX - rect.left) / rect.width) * span
    const lane = byLane.current[Math.floor((e.clientY - rect.top) / laneH)] ?? []
    const slack = (3 / rect.width) * span
    return lane.find((b) => b[1] - slack <= t && t <= b[1] + b[3] + slack)
  }
  const step = tickStep(span)
  const ticks = Array.from({ length: Math.floor(span / step) + 1 }, (_, i) => i * step)
  return (
    <section class="waterfall" data-testid="waterfall">
      <p class="facts">
        <span data-testid="waterfall-caption">
          {w.bars.length.toLocaleString('en-US')} exchanges over {ms(s.durationMs)} · at most {w.lanes} at once
          {w.lanes > 1 ? ` (from ${ms(w.peakAtMs)})` : ''}
        </span>
        <span class="legend">
          <i class="wf-model" /> model <i class="wf-tool" /> tool <i class="wf-ws" /> WebSocket <i class="wf-http" /> HTTP <i class="wf-failed" /> failed{' '}
          <i class="wf-wait" /> before the response head
        </span>
      </p>
      <div class="axis" data-testid="waterfall-axis">
        {ticks.map((t) => (
          <span key={t} style={{ left: `${(t / span) * 100}%` }}>
            {ms(t)}
          </span>
        ))}
      </div>
      <div ref={box} class="wf-canvas">
        <canvas
          ref={canvas}
          style={{ width: `${width}px`, height: `${height}px` }}
          onMouseMove={(e) => setHover(at(e))}
          onMouseLeave={() => setHover(undefined)}
          onClick={(e) => {
            const b = at(e)
            if (b) onOpen(b[0])
          }}
          data-testid="waterfall-canvas"
        />
      </div>
      <p class="muted small" data-testid="waterfall-hover">
        {hover
          ? `#${hover[0]} ${KINDS[hover[5]]}: started ${ms(hover[1])}, response head after ${ms(hover[2])}, last chunk after ${ms(hover[3])}${hover[6] ? ' · failed' : ''} (click to open)`
          : 'Point at a bar to read it; click to open the exchange. Each lane holds exchanges one after another; the lanes show how many were in flight at once.'}
      </p>
    </section>
  )
}
