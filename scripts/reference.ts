/**
 * docs/reference.md, generated: every command's `--help` as the CLI prints it, and the tables of options
 * declared once in code (trace/option-declaration.ts: session, redaction, faults, proxy, upstream, sealed runs,
 * limits, diff). `npm run reference` writes it; scripts/reference.test.ts fails when the page is not what this
 * prints, so the page cannot drift from the flags.
 */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { COMMAND_ENTRIES } from '../cli/commands/index.ts'
import { runCli } from '../cli/main.ts'
import type { Io } from '../cli/output.ts'
import { CONFIG_OPTIONS, REDACTION_OPTIONS, SESSION_OPTIONS } from '../engine/index.ts'
import { FAULTS_OPTIONS } from '../faults/index.ts'
import { PROXY_LIMITS, PROXY_OPTIONS, SEALED_OPTIONS, UPSTREAM_OPTIONS } from '../proxy/index.ts'
import { DIFF_OPTIONS, IDENTITY_OPTIONS, type OptionDeclaration, type OptionTable } from '../trace/index.ts'

/** The declared options, a section each: who takes them, and the prefix of their names in code. */
export const OPTION_SECTIONS: ReadonlyArray<{ title: string; intro: string; prefix: string; table: OptionTable }> = [
  {
    title: 'Session',
    intro: "A session's options: flags of `record`, `replay`, `serve`, `session` and `mcp`; `openSession(...)` and `install(...)` in code.",
    prefix: '',
    table: SESSION_OPTIONS,
  },
  {
    title: 'Matching',
    intro:
      "Which requests are the same request: flags of `record`, `replay` and `serve` (a serve's named sessions too); `identity` of `openSession(...)` and `install(...)`. Applied at replay: the recorded requests are matched again under these rules.",
    prefix: 'identity.',
    table: IDENTITY_OPTIONS,
  },
  {
    title: 'Redaction',
    intro: 'What is scrubbed before anything is stored, on top of the defaults; every command that stores or checks traces takes the flags.',
    prefix: '',
    table: { ...prefixed('redaction.', REDACTION_OPTIONS), ...CONFIG_OPTIONS },
  },
  {
    title: 'Faults',
    intro: 'A faulted run: `record`, `replay`, `serve`, `mcp`; `check` and `inspect` take `--contracts`; `install({ faults, faultsSeed })`.',
    prefix: '',
    table: FAULTS_OPTIONS,
  },
  {
    title: 'Proxy',
    intro: 'How the proxy listens and replays: `record`, `replay`, `serve`; `runProxySession(...)` and `startProxy(...)`.',
    prefix: '',
    table: PROXY_OPTIONS,
  },
  {
    title: 'Upstreams',
    intro: 'How requests that go live reach their servers: `record`, `replay`, `serve`, `drift`.',
    prefix: 'upstream.',
    table: UPSTREAM_OPTIONS,
  },
  {
    title: 'Sealed runs',
    intro:
      'A wrapped command in its own network namespace (Linux; docs/sealed-runs.md): `record`, `replay`, `verify`; `runProxySession({ sealed: { bridges } })`.',
    prefix: '',
    table: SEALED_OPTIONS,
  },
  {
    title: 'Proxy limits',
    intro:
      'The proxy limits of `record`, `replay` and `serve` (flags) and of `startProxy({ limits })` (code). Each is a whole number > 0; anything else is refused with `TR_INVALID_OPTION` naming the flag or option.',
    prefix: 'limits.',
    table: PROXY_LIMITS,
  },
  { title: 'Diff', intro: 'What `tr-proxy diff` and `diffTraces(a, b, options)` ignore.', prefix: '', table: DIFF_OPTIONS },
]

function prefixed(prefix: string, table: OptionTable): OptionTable {
  return Object.fromEntries(Object.entries(table).map(([k, d]) => [`${prefix}${k}`, d]))
}

export const REFERENCE_PATH = fileURLToPath(new URL('../docs/reference.md', import.meta.url))

/** What `tr-proxy ...ARGS --help` prints, at the CLI's width for a pipe (100 columns). */
async function helpOf(args: string[]): Promise<string> {
  const printed: string[] = []
  const log = console.log
  const columns = Object.getOwnPropertyDescriptor(process.stdout, 'columns')
  Object.defineProperty(process.stdout, 'columns', { value: undefined, configurable: true })
  console.log = (...parts: unknown[]) => printed.push(parts.map(String).join(' '))
  const io: Io = { out: (s) => printed.push(s), err: (s) => printed.push(s) } as Io
  try {
    await runCli([...args, '--help'], io)
  } finally {
    console.log = log
    if (columns) Object.defineProperty(process.stdout, 'columns', columns)
    else delete (process.stdout as { columns?: number }).columns
  }
  return printed.join('\n').trimEnd()
}

/** One option's line: flag, name in code, choices, default (with its unit), then its help. */
function optionLine(code: string, d: OptionDeclaration): string {
  const facts = [`\`--${d.flag}\` (\`${code}\`)`]
  if (d.choices) facts.push(`one of ${d.choices.map((c) => `\`${c}\``).join(', ')}`)
  if (d.type === 'strings') facts.push('repeatable')
  if (d.default !== undefined) facts.push(`default ${d.unit ? `${d.default} ${d.unit}` : `\`${String(d.default)}\``}`)
  else if (d.unit) facts.push(`in ${d.unit}`)
  return `- ${facts.join(', ')}: ${d.help}`
}

function optionSections(): string[] {
  const lines: string[] = []
  for (const { title, intro, prefix, table } of OPTION_SECTIONS) {
    lines.push(`### ${title}`, '', intro, '', ...Object.entries(table).map(([key, d]) => optionLine(`${prefix}${key}`, d)), '')
  }
  return lines
}

/** The whole page. */
export async function renderReference(): Promise<string> {
  const parts = [
    '# Reference',
    '',
    '<!-- path-check: generated by scripts/reference.ts (`npm run reference`); do not edit by hand. -->',
    '',
    'Every command of `tr-proxy` with its flags, as `--help` prints them, and the options declared once in code.',
    '',
    '## Options',
    '',
    'Each option is declared once (trace/option-declaration.ts), with its flag, its name in code, its default and its',
    'help; the flags, `--help`, the checks and this list are read from that declaration.',
    '',
    ...optionSections(),
    '## Commands',
    '',
    '```text',
    await helpOf([]),
    '```',
  ]
  for (const entry of COMMAND_ENTRIES) {
    const name = entry.names[0] as string
    parts.push('', `### tr-proxy ${name}`, '', '```text', await helpOf([name]), '```')
  }
  return `${parts.join('\n')}\n`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(REFERENCE_PATH, await renderReference())
  process.stdout.write(`wrote ${REFERENCE_PATH}\n`)
}
