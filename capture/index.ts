/** The life of one captured request, once for every capture path: lifecycle, live tee, playback, pacing, refusal. */

export type { Http2LiveRequest, Http2Timeouts } from './http2-forward.ts'
export { forwardOverHttp2 } from './http2-forward.ts'
export type { Http2Answer, Http2StreamHooks, Http2StreamRequest } from './http2-stream.ts'
export { answerHttp2Stream, http2Exchange, resetHttp2Stream } from './http2-stream.ts'
export type { Http2RequestFields } from './http2-wire.ts'
export { HTTP2_STREAM_ERROR, http2ErrorCodeIn, http2ErrorName, http2Fields, http2RequestFields, http2ResponseFields, isHttp2Failure } from './http2-wire.ts'
export type { CapturedExchange, CaptureOptions, CaptureSession, ReadBody } from './lifecycle.ts'
export { captureRequest } from './lifecycle.ts'
export type { ClientTarget, LiveEvents, UpstreamControl } from './live-tee.ts'
export { toNodeError } from './node-error.ts'
export type { Pace, PaceOption } from './pacing.ts'
export { DEFAULT_PACE, formatPace, keepsChunksApart, PACE_OPTION, parsePace, releaseAtMs } from './pacing.ts'
export type { PathOptions } from './path-options.ts'
export { captureOptions, checkPathOptions, PATH_OPTIONS } from './path-options.ts'
export type { PlaybackTarget, WireHead } from './playback-driver.ts'
export { drivePlayback } from './playback-driver.ts'
export type { RefusalResponse } from './refusal.ts'
export {
  ERROR_HEADER,
  GRPC_REFUSAL_STATUS,
  grpcMessage,
  lateRequestRefusal,
  REFUSAL_STATUS,
  REFUSAL_STATUS_TEXT,
  refusalPlayback,
  refusalResponse,
  TOO_LARGE_STATUS,
} from './refusal.ts'
export type { ExchangeProgress } from './transport-rules.ts'
export { bodyTooLarge, DEFAULT_DRAIN_AFTER_ABORT_MS, errorPhase } from './transport-rules.ts'
export { forwardThroughDispatcher, LazyAgent, rawHeaderList, type Undici } from './undici-upstream.ts'
export { encodeFrame, FrameParser, OPCODE, opcodeName, switchedHeaders, websocketAccept } from './websocket-frames.ts'
export type { WebSocketPlayOptions } from './websocket-session.ts'
export { playWebSocket, relayWebSocket, tapWebSocket } from './websocket-session.ts'
