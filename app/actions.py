"""Every command of the window, once: the menus, the keyboard shortcuts and the Help > Shortcuts list
are all made from this table, so they cannot disagree."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    id: str            # the window's method `cmd_<id>` or a slot given by the window
    menu: str          # "" for a shortcut without a menu entry
    text: str
    keys: tuple = ()   # the first one is shown in the menu
    help: str = ""     # for the shortcuts list; the text when empty
    scope: str = "window"   # "window", or "takes": only while the takes table has the focus


COMMANDS = (
    Command("open", "&File", "Open model...", ("Ctrl+O",), "open a model"),
    Command("open_demo", "&File", "Open the demo model"),
    Command("get_models", "&File", "Get models...", help="download a released model, convert it and open it"),
    Command("export", "&File", "Export selected takes...", ("Ctrl+E",), "export the selected takes"),
    Command("book", "&File", "Speak a book...",
            help="a book (EPUB, Markdown, text) to chapter files, subtitles and an M4B, in the current voice"),
    Command("serve", "&File", "Serve this model...", help="the model as a speech service: OpenAI's API, Wyoming"),
    Command("quit", "&File", "Quit", ("Ctrl+Q",)),
    Command("generate", "&Takes", "Generate", ("Ctrl+Return", "Ctrl+Enter"), "generate a take"),
    Command("stop", "&Takes", "Stop", ("Esc",), "stop the take, the script, or playback"),
    Command("play", "&Takes", "Play / stop selected", ("Space",), "play / stop the selected take (takes table)",
            scope="takes"),
    Command("ab", "&Takes", "A/B the two selected"),
    Command("blind_test", "&Takes", "Blind test the two selected...", ("Ctrl+T",),
            "ABX or blind preference test of the two selected takes"),
    Command("switch_ab", "", "Switch A/B", ("B",), "switch between A and B while playing"),
    Command("compare", "&Takes", "Compare placements", ("Ctrl+K",), "compare placements"),
    Command("restore", "&Takes", "Restore settings from take"),
    Command("rename", "&Takes", "Rename take..."),
    Command("delete", "&Takes", "Delete selected takes...", ("Del",), "delete the selected takes"),
    Command("new_voice", "&Voices", "New voice from audio..."),
    Command("show_voices", "&Voices", "Show the voice library"),
    Command("keep_voice", "&Voices", "Keep the voice of the selected take...",
            help="the selected take's voice (designed, a speaker, any take) as a profile for Base models"),
    Command("pronunciation", "&Voices", "Pronunciation rules...", help="how words are said: term -> respelling"),
    Command("shortcuts", "&Help", "Shortcuts", ("F1",), "this list"),
    Command("modes", "&Help", "What the placement modes mean"),
    Command("messages", "&Help", "Messages"),
)


def shortcut_lines() -> list[str]:
    return [f"{' / '.join(c.keys):<22} {c.help or c.text}" for c in COMMANDS if c.keys]
