/** What the engine decides for one WebSocket upgrade (Session.handleWebSocket). */
import type { Exchange, ToolReplayError } from '../trace/index.ts'
import type { Playback } from './decision.ts'
import type { WebSocketRecorder } from './websocket-recorder.ts'
import type { WebSocketPlayback } from './websocket-replay.ts'

/**
 * What a capture path must do with one WebSocket upgrade: relay it and feed `recorder` (passthrough's records
 * nothing), play the recorded session (`websocket`; absent when the upstream had refused the upgrade, whose
 * HTTP answer `playback` is), or refuse it.
 */
export type WebSocketDecision =
  | { kind: 'forward'; recorder: WebSocketRecorder }
  | { kind: 'replay'; exchange: Exchange; playback: Playback; websocket?: WebSocketPlayback }
  | { kind: 'fail'; error: ToolReplayError }
