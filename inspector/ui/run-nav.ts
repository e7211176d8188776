/**
 * A run page's place in the URL, so a link keeps it: the selected exchange (`#/run/NAME/x/SEQ`), the search
 * (`q`), the filters (`f`), the view (`view`: timeline, summary, waterfall) and `partial` for a recording.
 */
import { seg } from './api.ts'

/** What a run page's URL holds besides the run and the exchange. */
export interface RunPlace {
  partial: boolean
  q: string
  filters: string[]
  view: 'timeline' | 'summary' | 'waterfall'
}

/** The place a run page's query says. */
export function placeOf(query: URLSearchParams): RunPlace {
  const view = query.get('view')
  return {
    partial: query.get('partial') === '1',
    q: query.get('q') ?? '',
    filters: (query.get('f') ?? '').split(',').filter((f) => f !== ''),
    view: view === 'summary' || view === 'waterfall' ? view : 'timeline',
  }
}

/** The hash path of a run page at `place`, with exchange `seq` selected. */
export function runPath(name: string, place: RunPlace, seq?: number): string {
  const q = new URLSearchParams()
  if (place.partial) q.set('partial', '1')
  if (place.q !== '') q.set('q', place.q)
  if (place.filters.length > 0) q.set('f', place.filters.join(','))
  if (place.view !== 'timeline') q.set('view', place.view)
  const query = q.toString()
  return `/run/${seg(name)}${seq !== undefined ? `/x/${seq}` : ''}${query ? `?${query}` : ''}`
}

/** Replaces the URL without a history entry (typing in the search box). */
export function replacePath(path: string): void {
  history.replaceState(null, '', `${location.pathname}${location.search}#${path}`)
  dispatchEvent(new HashChangeEvent('hashchange'))
}
