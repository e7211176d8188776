/**
 * A gRPC call as the timeline reads it: the service and method (from the request's path), how many
 * length-prefixed messages each side sent, and the call's status (`grpc-status` and `grpc-message`, from the
 * trailers, or from the head of a Trailers-Only answer).
 */
import type { TraceReader } from '../store/index.ts'
import { decodeGrpcBody, type Exchange, headerValue, isGrpcContentType } from '../trace/index.ts'

/** gRPC's status codes by number (grpc/grpc doc/statuscodes.md). */
const STATUS_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
]

/** One gRPC call of a run. */
export interface GrpcCallRow {
  /** `test.Greeter`. */
  service: string
  /** `StreamHellos`. */
  method: string
  /** Messages the client sent, and the server sent back. */
  requestMessages: number
  responseMessages: number
  /** The call's status code and its name (`5`, `NOT_FOUND`); absent when no status arrived. */
  status?: number
  statusName?: string
  /** `grpc-message`, percent-decoded. */
  message?: string
}

/** The call an exchange is, when its request is gRPC; reads its bodies only then. */
export async function grpcCallOf(reader: TraceReader, x: Exchange): Promise<GrpcCallRow | undefined> {
  if (!isGrpcContentType(headerValue(x.request.headers, 'content-type'))) return undefined
  const path = pathOf(x.request.url)
    .split('/')
    .filter((p) => p !== '')
  const head = x.outcome.kind === 'response' ? x.outcome.response : x.outcome.error.partial
  const count = async (ref: Exchange['request']['body'], use: string) => (ref ? decodeGrpcBody(await reader.bodyBytes(ref, use)).messages.length : 0)
  const row: GrpcCallRow = {
    service: path.length >= 2 ? (path.at(-2) as string) : '',
    method: path.at(-1) ?? '',
    requestMessages: await count(x.request.body, `exchange #${x.seq} request`),
    responseMessages: head ? await count(head.body, `exchange #${x.seq} response`) : 0,
  }
  const status = head ? (headerValue(head.trailers, 'grpc-status') ?? headerValue(head.headers, 'grpc-status')) : undefined
  if (status !== undefined && /^\d+$/.test(status.trim())) {
    row.status = Number(status.trim())
    row.statusName = STATUS_NAMES[row.status] ?? `status ${row.status}`
  }
  const message = head ? (headerValue(head.trailers, 'grpc-message') ?? headerValue(head.headers, 'grpc-message')) : undefined
  if (message !== undefined && message !== '') row.message = percentDecoded(message)
  return row
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname
  } catch {
    return url
  }
}

function percentDecoded(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}
