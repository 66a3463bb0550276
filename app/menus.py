"""The window's menus and shortcuts, made from the commands table (app/actions.py), and its View menu
(theme and touch, each auto or forced)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut
from PySide6.QtWidgets import QMenu

from . import theme, touch
from .actions import COMMANDS


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
