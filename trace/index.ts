/** The trace model and pure operations on it. No I/O. */

export { bodyBytes, bodyFromBytes, bodyFromChunks, concatBytes, headerValue, splitChunks, tryUtf8 } from './body.ts'
export { canonicalJson } from './canonical-json.ts'
export { sha256 } from './digest.ts'
export type { ErrorCode } from './errors.ts'
export { ErrorCodes, isToolReplayError, ToolReplayError } from './errors.ts'
export type {
  BodyChunk,
  BodyRef,
  ErrorPhase,
  Exchange,
  ExchangeOrigin,
  HeaderPairs,
  Lineage,
  Outcome,
  PatchRecord,
  RecordedError,
  RecordedRequest,
  RecordedResponse,
  ResponseHead,
  Trace,
  TraceMeta,
} from './exchange.ts'
export { TRACE_FORMAT_VERSION } from './exchange.ts'
export type { JsonDifference, PathSegment } from './json-path.ts'
export { diffJson, formatJsonPath, parseJsonPath, replaceAtJsonPath, selectJsonPath, setAtJsonPath } from './json-path.ts'
export type { BodyFingerprint, IdentityOptions, IdentityParts, IdentityRequest, RequestIdentity } from './request-identity.ts'
export {
  ALWAYS_IGNORED_HEADERS,
  computeIdentity,
  describeIdentityDifferences,
  identityDistance,
  normalizeUrl,
} from './request-identity.ts'
