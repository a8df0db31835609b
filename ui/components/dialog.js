// Modal dialogs on the native <dialog> element (focus is kept inside, Escape closes), returning
// focus to where it was when they close.

import { h, id } from '../lib/dom.js';

/**
 * Opens a modal form.
 *   title: heading text; body: nodes inside the form; confirmLabel; danger: red confirm button;
 *   typeToConfirm: a string the user must type exactly before confirming;
 *   onConfirm(form, dialog): async; throw to keep the dialog open (show the error inside it);
 *     its result resolves the returned promise. Cancel resolves null.
 */
export function openDialog({ title, body = [], confirmLabel = 'OK', cancelLabel = 'Cancel', danger = false, typeToConfirm, onConfirm, className = '' }) {
  const previous = document.activeElement;
  const titleId = id('dlg-title');
  const errorBox = h('div', { class: 'dialog-error', role: 'alert', hidden: true });
  const confirm = h('button', { type: 'submit', class: danger ? 'btn danger' : 'btn primary' }, confirmLabel);
  let typed = null;
  if (typeToConfirm) {
    const inputId = id('confirm');
    typed = h('input', {
      id: inputId, name: 'confirm', autocomplete: 'off', spellcheck: 'false', dataset: { field: 'confirm' },
      oninput: () => { confirm.disabled = typed.value !== typeToConfirm; },
    });
    confirm.disabled = true;
  }
  const cancel = h('button', { type: 'button', class: 'btn', onclick: () => dialog.close('cancel') }, cancelLabel);
  const form = h('form', { method: 'dialog', novalidate: true },
    h('h2', { id: titleId }, title),
    body,
    typed && h('div', { class: 'field' },
      h('label', { for: typed.id }, 'Type ', h('strong', { class: 'mono' }, typeToConfirm), ' to confirm'),
      typed),
    errorBox,
    h('div', { class: 'actions' }, cancel, confirm));
  const dialog = h('dialog', { 'aria-labelledby': titleId, class: `dialog ${className}` }, form);
  document.body.append(dialog);

  return new Promise((resolve) => {
    let result = null;
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      if (confirm.disabled) return;
      if (!onConfirm) {
        result = true;
        dialog.close('ok');
        return;
      }
      confirm.disabled = true;
      confirm.setAttribute('aria-busy', 'true');
      errorBox.hidden = true;
      try {
        result = await onConfirm(form, dialog);
        dialog.close('ok');
      } catch (err) {
        // err.shown: the error is already displayed inside the form (field findings).
        if (!err.shown) {
          errorBox.replaceChildren(h('strong', {}, err.title || 'Error'), ' ', err.message || String(err));
          errorBox.hidden = false;
        }
        confirm.disabled = false;
      } finally {
        confirm.removeAttribute('aria-busy');
      }
    });
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (previous && previous.isConnected) previous.focus();
      resolve(dialog.returnValue === 'ok' ? result : null);
    });
    dialog.showModal();
    const first = form.querySelector('input:not([type=hidden]), select, textarea');
    (first || cancel).focus();
  });
}
