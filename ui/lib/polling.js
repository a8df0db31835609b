// Polling a list while something in it changes: read, render, and read again every 2 s while
// the page is visible and the items are in flux.

import { replace, errorNotice } from './dom.js';
import * as api from './api.js';

/**
 * The read loop of a workload list page: GET `url`, then `render(items)`; a failed read shows
 * in `errorBox`; `tableSlot` stops being busy after the first answer; while `busy(items)`
 * holds (and the page is visible) it reads again every 2 s. Returns { load, dispose }.
 */
export function listPoller({ url, errorBox, tableSlot, render, busy }) {
  let disposed = false;
  let timer = null;
  async function load() {
    clearTimeout(timer);
    try {
      const items = await api.list(url);
      if (disposed) return;
      replace(errorBox);
      render(items);
      if (busy(items) && !document.hidden) timer = setTimeout(load, 2000);
    } catch (err) {
      if (err.status === 401) return;
      replace(errorBox, errorNotice(err, 'cluster'));
    } finally {
      tableSlot.removeAttribute('aria-busy');
    }
  }
  return {
    load,
    dispose() {
      disposed = true;
      clearTimeout(timer);
    },
  };
}
