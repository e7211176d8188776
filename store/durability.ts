/**
 * Durability: how far a recorded exchange is on its way to disk before the client that asked for it sees its
 * answer end (capture/live-tee.ts holds the final chunk until the store confirms the exchange). Declared once
 * here; the CLI flag, the option of openSession/install and docs/durability.md derive from it.
 *
 *   write  (default) the exchange's batch is written to LevelDB's log (handed to the OS): it survives the
 *          recording process being killed, not a power cut or an OS crash (the OS may not have written it yet).
 *   fsync  its group commit is synced to the disk first (LevelDB's log fsync'd, and the piece files of its big
 *          bodies with their folders): it survives a power cut too, as far as the disk keeps what it confirmed.
 */
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The durability levels, weakest first. */
export const DURABILITY_LEVELS = ['write', 'fsync'] as const

/** One durability level (see DURABILITY_LEVELS). */
export type Durability = (typeof DURABILITY_LEVELS)[number]

/** The option as declared: its values, default and help. */
export const DURABILITY_OPTION = {
  choices: DURABILITY_LEVELS,
  default: 'write',
  describe:
    'How far each recorded exchange is on its way to disk before its client sees the answer end: write (default) survives the recorder being killed; fsync waits for a synced group commit and survives a power cut (see docs/durability.md)',
} as const satisfies { choices: readonly Durability[]; default: Durability; describe: string }

/** Checks a durability given in code or on the command line; TR_INVALID_OPTION naming the levels. */
export function parseDurability(input: unknown): Durability {
  if (input === undefined) return DURABILITY_OPTION.default
  if (typeof input === 'string' && (DURABILITY_LEVELS as readonly string[]).includes(input)) return input as Durability
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid durability ${JSON.stringify(input)}: use ${DURABILITY_LEVELS.map((l) => `"${l}"`).join(' or ')} (default "${DURABILITY_OPTION.default}"). See docs/durability.md.`,
  )
}
