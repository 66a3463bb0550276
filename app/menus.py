"""The window's menus and shortcuts, made from the commands table (app/actions.py) with what each command
calls (command_slots: the presenters' actions and the window's dialogs), and its View menu (theme and
touch, each auto or forced)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut
from PySide6.QtWidgets import QMenu

from . import theme, touch
from .actions import COMMANDS, shortcut_lines
from .opening import choose_model


def command_slots(window) -> dict:
    """Command id (app/actions.py) -> what it calls."""
    p, takes = window.presenter, window.takes

    def keep_voice() -> None:
        if takes.current():
            takes.ask_keep_voice(takes.current())
    return {"open": lambda: choose_model(window), "open_demo": lambda: p.core.load_model(None),
            "export": lambda: takes.export_selected(), "quit": window.close, "generate": lambda: p.core.generate(),
            "stop": p.core.stop, "play": p.takes.toggle_play, "ab": p.takes.start_ab,
            "blind_test": lambda: p.takes.start_blind_test(), "switch_ab": p.playback.switch_ab,
            "compare": p.takes.compare_current, "restore": lambda: p.takes.restore_take(takes.current()),
            "rename": takes.rename_current, "delete": takes.delete_selected,
            "new_voice": window.library.new_from_audio, "keep_voice": keep_voice,
            "show_voices": lambda: window.workspace.show_page(window.library),
            "shortcuts": lambda: window.info_box("Shortcuts", "\n".join(shortcut_lines())),
            "pronunciation": window.pronunciation_dialog.show, "serve": window.serve_dialog.show,
            "book": window.book_dialog.show, "get_models": window.show_models, "modes": window.show_modes_help,
            "messages": lambda: window.info_box("Messages", window.session.recent_messages())}


def build_menus(window, slots: dict, takes_table) -> None:
    """Every command of COMMANDS as a menu entry and/or shortcut calling slots[command.id]; a "takes"
    command's keys act only while the takes table has the focus (Space must still type a space)."""
    menus = {}
    for command in COMMANDS:
        keys = [QKeySequence(k) for k in command.keys]
        if command.scope == "takes":
            for key in keys:
                QShortcut(key, takes_table, slots[command.id], context=Qt.WidgetShortcut)
        if not command.menu:
            for key in keys:
                QShortcut(key, window, slots[command.id])
            continue
        if command.menu not in menus:
            menus[command.menu] = window.menuBar().addMenu(command.menu)
        action = QAction(command.text, window)
        if command.scope == "window":
            action.setShortcuts(keys)
        elif keys:
            action.setText(f"{command.text}\t{command.keys[0]}")
        action.triggered.connect(slots[command.id])
        menus[command.menu].addAction(action)
    window.menuBar().insertMenu(menus["&Help"].menuAction(), _view_menu(window))


def _view_menu(window) -> QMenu:
    menu = QMenu("&View", window)
    for title, choices, current, apply in (
            ("Theme", theme.CHOICES, window.theme.choice, window.set_theme),
            ("Touch", touch.CHOICES, str(window.settings.value("view/touch", "auto")), window.set_touch)):
        sub = menu.addMenu(title)
        group = QActionGroup(sub)
        for choice in choices:
            action = sub.addAction(choice)
            action.setCheckable(True)
            action.setChecked(choice == current)
            action.triggered.connect(lambda _=False, c=choice, f=apply: f(c))
            group.addAction(action)
    return menu
