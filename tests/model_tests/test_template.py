"""Loading and checking model templates: each way a template can be broken is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from baobab.exceptions import KnobConfigError, TemplateError
from baobab.model import BaseModel, CategoricalKnob, FixedKnob, FloatKnob, PolicyKnob
from baobab.model._template import check_template, load_template

TEMPLATES = Path(__file__).parent / "templates"


def test_loads_a_template_class_and_its_knob_config() -> None:
    cls = load_template(TEMPLATES / "tiny_models.py", "Centroid")
    assert issubclass(cls, BaseModel) and cls.__name__ == "Centroid"
    assert check_template(cls) == {
        "shrink": FloatKnob(0.0, 0.9),
        "norm": CategoricalKnob(["l1", "l2"]),
        "kind": FixedKnob("centroid"),
        "quick": PolicyKnob("EARLY_STOP"),
    }


def test_a_file_is_imported_once_per_content(tmp_path: Path) -> None:
    source = (TEMPLATES / "tiny_models.py").read_text()
    copy = tmp_path / "copy.py"
    copy.write_text(source)
    original = load_template(TEMPLATES / "tiny_models.py", "Centroid")
    assert load_template(copy, "Centroid") is original
    assert load_template(copy, "Forgetful").__module__ == original.__module__
    copy.write_text(source + "\n# edited\n")
    edited = load_template(copy, "Centroid")
    assert edited is not original and edited.__module__ != original.__module__


def test_import_error_shows_the_templates_traceback() -> None:
    with pytest.raises(TemplateError, match="importing the template failed") as info:
        load_template(TEMPLATES / "import_error.py", "Anything")
    message = str(info.value)
    path = TEMPLATES.resolve() / "import_error.py"
    assert f'File "{path}", line 8, in <module>' in message
    assert f'File "{path}", line 5, in scale' in message
    assert "return 1 / 0" in message
    assert message.endswith("ZeroDivisionError: division by zero")
    assert "importlib" not in message and "_template.py" not in message


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef f(:\n    pass\n")
    with pytest.raises(TemplateError, match=r"(?s)line 2\n.*def f\(:.*SyntaxError"):
        load_template(broken, "F")


def test_a_failed_import_is_not_cached(tmp_path: Path) -> None:
    template = tmp_path / "t.py"
    template.write_text("raise ImportError('no numpy here')\n")
    with pytest.raises(TemplateError, match="ImportError: no numpy here"):
        load_template(template, "T")
    with pytest.raises(TemplateError, match="ImportError: no numpy here"):
        load_template(template, "T")


def test_missing_file() -> None:
    with pytest.raises(TemplateError, match=r"nowhere\.py: cannot read the template: No such file"):
        load_template(TEMPLATES / "nowhere.py", "Model")


def test_missing_class_lists_the_classes_defined_in_the_file() -> None:
    with pytest.raises(TemplateError, match=r"no class 'Model'; classes defined in the file: Incomplete, NotAModel$"):
        load_template(TEMPLATES / "not_a_model.py", "Model")


def test_a_name_that_is_not_a_class() -> None:
    with pytest.raises(TemplateError, match="'helper' is a int, not a class"):
        load_template(TEMPLATES / "not_a_model.py", "helper")


def test_a_class_not_deriving_from_base_model() -> None:
    with pytest.raises(TemplateError, match=r"class 'NotAModel' does not derive from baobab.model.BaseModel"):
        load_template(TEMPLATES / "not_a_model.py", "NotAModel")


def test_missing_methods_are_named() -> None:
    with pytest.raises(TemplateError, match=r"class 'Incomplete' does not implement load_parameters, predict$"):
        load_template(TEMPLATES / "not_a_model.py", "Incomplete")


def test_get_knob_config_that_raises_shows_its_traceback() -> None:
    cls = load_template(TEMPLATES / "bad_knobs.py", "RaisingKnobs")
    with pytest.raises(TemplateError, match=r"RaisingKnobs.get_knob_config\(\) raised") as info:
        check_template(cls)
    message = str(info.value)
    assert f'File "{TEMPLATES.resolve() / "bad_knobs.py"}", line 26, in get_knob_config' in message
    assert message.endswith("NameError: name 'undefined_name' is not defined")


def test_a_bad_knob_config_names_the_knob() -> None:
    cls = load_template(TEMPLATES / "bad_knobs.py", "InvertedRange")
    with pytest.raises(
        TemplateError, match=r"returned a bad config: knob 'lr': FloatKnob: value_min=0.1 is greater"
    ) as info:
        check_template(cls)
    assert isinstance(info.value.__cause__, KnobConfigError) and info.value.__cause__.knob == "lr"


def test_a_knob_config_that_is_not_a_dict() -> None:
    cls = load_template(TEMPLATES / "bad_knobs.py", "NotADict")
    with pytest.raises(TemplateError, match="a knob config must be a dict of name to knob, got list"):
        check_template(cls)
