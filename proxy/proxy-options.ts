/**
 * The options of a proxy run, declared once: each with its name in `runProxySession`/`startProxy` options, its
 * flag of `record`, `replay` and `serve` (`drift` for the upstream ones), its default and help. The CLI's flags,
 * `--help`, the check of each value and docs/reference.md are read from these tables (the limits are PROXY_LIMITS).
 */
import { readFileSync } from 'node:fs'
import { PACE_OPTION } from '../capture/index.ts'
import { parseBridges } from '../seal/index.ts'
import { ErrorCodes, type OptionDeclaration, ToolReplayError } from '../trace/index.ts'
import { parseReverse } from './reverse-routes.ts'
import { parseResolve } from './upstream.ts'

/** Port of a proxy started without a command (with one, a free loopback port is used). */
export const DEFAULT_PROXY_PORT = 8080

const list = (value: unknown, name: string): string[] => {
  if (Array.isArray(value)) return value.map(String)
  throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid ${name} ${JSON.stringify(value)}: give it once per value (repeatable).`)
}

/** How the proxy listens and replays. */
export const PROXY_OPTIONS = {
  port: {
    flag: 'port',
    alias: 'p',
    type: 'number',
    help: `Proxy port (default: a free port with a command, else ${DEFAULT_PROXY_PORT})`,
    parse: (value: unknown, name: string): number => {
      if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 65535) return value
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid ${name} ${String(value)}: use a whole number from 0 to 65535 (0 = any free port).`)
    },
  },
  host: { flag: 'host', type: 'string', default: '127.0.0.1', help: 'Interface to bind; anything but loopback exposes the proxy to the network' },
  reverse: {
    flag: 'reverse',
    type: 'strings',
    help: 'Reverse mode: serve this upstream on the proxy port (URL at /, or NAME=URL under /NAME/; repeatable), for clients that take a base URL (they need no proxy variables and no CA); a wrapped command gets the base URLs and the proxy variables',
    parse: (value: unknown, name: string) => parseReverse(list(value, name)),
  },
  h2c: {
    flag: 'h2c',
    type: 'boolean',
    default: false,
    help: 'Also serve HTTP/2 with prior knowledge (cleartext) on the proxy port: for gRPC insecure channels and the AWS SDK HTTP/2 handler pointed at the proxy with --reverse',
  },
  chunkGapMs: {
    flag: 'chunk-gap-ms',
    type: 'number',
    help: 'Gap between replayed chunks after each is flushed, never longer than the recorded one; raise it for clients across a real network (default: 0 over TLS, whose records keep chunks apart; 2 over plain HTTP)',
    parse: (value: unknown, name: string): number => {
      if (typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 60_000) return value
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid ${name} ${String(value)}: give a number of milliseconds from 0 to 60000.`)
    },
  },
  pace: PACE_OPTION,
} as const satisfies Record<string, OptionDeclaration>

/** How the proxy (and `drift`) reaches upstreams: the `upstream` option of a proxy run. */
export const UPSTREAM_OPTIONS = {
  resolve: {
    flag: 'resolve',
    type: 'strings',
    help: 'Map an upstream host: HOST=ADDRESS:PORT (repeatable); TLS still verifies HOST',
    parse: (value: unknown, name: string) => parseResolve(list(value, name)),
  },
  ca: {
    flag: 'upstream-ca',
    type: 'string',
    help: 'PEM file of extra CAs trusted for upstream TLS',
    // The flag names a file; the option in code holds its PEM text.
    parse: (value: unknown, name: string): string => {
      try {
        return readFileSync(String(value), 'utf8')
      } catch (err) {
        throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Cannot read ${name} ${String(value)}: ${(err as Error).message}. Give a PEM file.`)
      }
    },
  },
  insecure: { flag: 'insecure-upstream', type: 'boolean', default: false, help: 'Do not verify upstream TLS certificates' },
} as const satisfies Record<string, OptionDeclaration>

/** A sealed run (Linux): the command in its own network namespace; `bridges` are the `sealed` option of a proxy run. */
export const SEALED_OPTIONS = {
  sealed: {
    flag: 'sealed',
    type: 'boolean',
    default: false,
    help: 'Linux: run the command in its own network namespace whose only way out is Tool Replay, so clients that ignore the proxy variables are captured too (see docs/sealed-runs.md; `tr-proxy doctor` says whether it works here)',
  },
  bridges: {
    flag: 'bridge',
    type: 'strings',
    help: 'With --sealed: reach a host service live, as raw TCP, in every mode: PORT, PORT=ADDRESS:PORT or NAME[:PORT]=ADDRESS:PORT (repeatable)',
    parse: (value: unknown, name: string) => parseBridges(list(value, name)),
  },
} as const satisfies Record<string, OptionDeclaration>
