/**
 * A collapsible JSON tree that shows numbers exactly as written: the text is parsed with lossless-json, so
 * 12345678901234567890 and 0.1000000000000000000001 are shown as they are on the wire, not as a double.
 */
import { isLosslessNumber, parse } from 'lossless-json'
import { useState } from 'preact/hooks'

/** Parses JSON text keeping every number exact; undefined when it is not JSON. */
export function parseExact(text: string): { value: unknown } | undefined {
  try {
    return { value: parse(text) }
  } catch {
    return undefined
  }
}

/** The tree of `value` (from parseExact), first levels open. */
export function JsonTree({ value, name, depth = 0 }: { value: unknown; name?: string; depth?: number }) {
  const [open, setOpen] = useState(depth < 2)
  const label = name !== undefined ? <span class="jk">{name}: </span> : null
  if (isLosslessNumber(value))
    return (
      <div class="jl">
        {label}
        <span class="jn">{(value as { value: string }).value}</span>
      </div>
    )
  if (value === null || typeof value !== 'object') {
    const cls = typeof value === 'string' ? 'js' : typeof value === 'boolean' ? 'jb' : 'jz'
    return (
      <div class="jl">
        {label}
        <span class={cls}>{JSON.stringify(value)}</span>
      </div>
    )
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value as Record<string, unknown>)
  const brackets = Array.isArray(value) ? ['[', ']'] : ['{', '}']
  return (
    <div class="jl">
      <button type="button" class="jt" onClick={() => setOpen(!open)}>
        {open ? '▾' : '▸'}
      </button>
      {label}
      {brackets[0]}
      {!open && (
        <span class="jm">
          {' '}
          {entries.length} {Array.isArray(value) ? 'items' : 'keys'}{' '}
        </span>
      )}
      {open && (
        <div class="jc">
          {entries.map(([k, v]) => (
            <JsonTree key={k} name={k} value={v} depth={depth + 1} />
          ))}
        </div>
      )}
      {brackets[1]}
    </div>
  )
}
