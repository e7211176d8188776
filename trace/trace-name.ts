import { ErrorCodes, ToolReplayError } from './errors.ts'

/**
 * Throws TR_INVALID_OPTION unless `name` is a usable trace name: non-empty, at most 200 characters, no
 * slashes, backslashes or NUL, not starting with '.' (names appear in file names and messages).
 */
export function assertTraceName(name: unknown, what = 'trace name'): asserts name is string {
  if (typeof name === 'string' && name.length > 0 && name.length <= 200 && !/[\0/\\]/.test(name) && !name.startsWith('.')) return
  throw new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Invalid ${what} ${JSON.stringify(name)}: use 1-200 characters without '/', '\\' or NUL, not starting with '.' (e.g. "checkout" or "crm:inactive").`,
  )
}
