"""Findings from reading training code nobody had tuned on (rotation S: BasicSR, yolov5,
detr, Deformable-DETR, vits, ogb, improved-diffusion, vq-vae-2, Rainbow, TD3), each with
its twin. The cross-file shapes are fixture projects (`td3_like`, `dqn_like`)."""

from __future__ import annotations

import textwrap

from perflint.api import check_source


def _found(source: str, filename: str = "train.py") -> set[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip()
    return {(d.location.row, d.code) for d in check_source(source, filename, select=["ALL"])}


_DCN = """
    import logging
    import torch
    import torch.nn as nn


    class DCNv2Pack(nn.Module):
        def forward(self, x, feat):
            offset = self.conv_offset(feat)
            offset_absmean = torch.mean(torch.abs(offset))
            if {test}:
                {body}
            return self.conv(x + offset)
"""


def test_a_tensor_over_a_bound_that_only_warns_is_a_rare_branch():
    """BasicSR's deformable convolution warns when the offsets grow too large: a branch a
    healthy run never takes. The test still syncs every step; the warning does not."""
    body = """logger = logging.getLogger("basicsr")
                logger.warning(f"Offset abs mean is {offset_absmean}, larger than 50.")"""
    found = _found(_DCN.format(test="offset_absmean > 50", body=body))
    assert (10, "PFL206") in found
    assert not {f for f in found if f[0] > 10}, found


def test_a_bound_on_a_python_counter_guards_per_step_code():
    body = """warnings.warn(f"loss is {offset_absmean}")"""
    found = _found(_DCN.format(test="self.step > 50", body=body))
    assert (11, "PFL210") in found


def test_a_tensor_over_a_bound_whose_branch_computes_stays_per_step():
    body = """print(f"Offset abs mean is {offset_absmean}")"""
    found = _found(_DCN.format(test="offset_absmean > 50", body=body))
    assert (11, "PFL210") in found


_SR_MODEL = """
    import importlib
    import torch

    loss_module = importlib.import_module("basicsr.models.losses")


    class SRModel:
        def __init__(self, opt):
            self.device = torch.device("cuda")
            self.cri_pix = {made}.to(self.device)

        def optimize_parameters(self, current_iter):
            self.optimizer_g.zero_grad()
            self.output = self.net_g(self.lq)
            if self.cri_pix:
                l_pix = self.cri_pix(self.output, self.gt)
                l_pix.backward()
            self.optimizer_g.step()
"""


def test_an_instance_of_a_class_moved_to_the_device_is_a_module():
    """BasicSR builds its losses from a class looked up by name
    (`cri_pix_cls = getattr(loss_module, pixel_type)`): `if self.cri_pix:` tests a module
    or None, no tensor."""
    for made in ("cri_pix_cls(**opt['pixel_opt'])", "L1Loss(loss_weight=1.0)", "cls(**opt)"):
        source = _SR_MODEL.format(made=made)
        if made.startswith("cri_pix_cls"):
            source = source.replace("self.cri_pix = ", "cri_pix_cls = getattr(loss_module, 'L1Loss')\n"
                                    "        self.cri_pix = ")
        assert not {f for f in _found(source) if f[1] == "PFL206"}, made


def test_a_tensor_of_a_helper_moved_to_the_device_is_still_a_tensor():
    found = _found(_SR_MODEL.format(made="load_pixel_weights(opt['weights'])"))
    assert (15, "PFL206") in found


_LEVELS = """
    import torch
    import torch.nn as nn


    class DeformableTransformer(nn.Module):
        def forward(self, srcs, masks):
            flat, shapes = [], []
            for lvl, (src, mask) in enumerate(zip(srcs, masks)):
                bs, c, h, w = src.shape
                shapes.append({row})
                flat.append(src.flatten(2).transpose(1, 2))
            flat = torch.cat(flat, 1)
            shapes = torch.as_tensor(shapes, dtype=torch.long, device=flat.device)
            return flat, shapes
"""


def test_a_list_of_python_tuples_moved_every_step_is_host_data():
    """Deformable-DETR's `spatial_shapes`: one `(h, w)` per feature level, from `src.shape`,
    turned into a device tensor every forward."""
    assert (13, "PFL101") in _found(_LEVELS.format(row="(h, w)"))


def test_a_list_of_tuples_of_tensors_is_not_host_data():
    found = _found(_LEVELS.format(row="(mask.sum(), mask.amax())"))
    assert (13, "PFL101") not in found
