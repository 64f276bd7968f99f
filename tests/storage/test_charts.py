"""storage/charts.py writes every chart; assets/shared/charts.py shows it on the asset page."""

import base64

import pytest

from storage.charts import png_chart


def test_a_chart_is_written_whole_and_nothing_is_left_behind(tmp_path):
    path = tmp_path / "charts" / "funnel.png"
    with png_chart(path, figsize=(3, 2), dpi=50) as ax:
        ax.barh(["a", "b"], [3, 1])
    assert path.read_bytes().startswith(b"\x89PNG") and sorted(p.name for p in path.parent.iterdir()) == ["funnel.png"]
    with pytest.raises(RuntimeError), png_chart(tmp_path / "broken.png", figsize=(3, 2)) as ax:
        raise RuntimeError("drawing failed")
    assert not (tmp_path / "broken.png").exists()


def test_chart_metadata_embeds_the_png_beside_its_path(tmp_path):
    from assets.shared.charts import chart_metadata  # lazy: imports dagster (~1 s); only the tests that need it pay

    png = tmp_path / "c.png"
    with png_chart(png, figsize=(2, 2), dpi=30) as ax:
        ax.plot([0, 1], [0, 1])
    meta = chart_metadata(png, "a line", image_key="figure2", path_key="figure2_path")
    assert meta["figure2"].value == f"![a line](data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()})"
    from assets.shared.io_manager import location_of

    # the page shows the file's name as a link; the whole path is the link's title (#42 item 7)
    assert location_of(meta["figure2_path"]) == str(png) and meta["figure2_path"].value.startswith("[c.png](")
