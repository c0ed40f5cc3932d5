"""The stand-in diffs an imported instance as terraform-provider-google does: an
Optional+Computed field the program leaves out keeps its state value, an accelerator named by
partial URL is the one the state names (CompareSelfLinkOrResourceName), and a real change of a
ForceNew field still replaces."""

from __future__ import annotations

from tests.fakes.standin_gcp.replace_rules import replaced_paths, settled

INSTANCE = "gcp:compute/instance:Instance"
IMPORTED = {
    "guestAccelerators": [{"type": "nvidia-tesla-t4", "count": 1}],
    "bootDisk": {"deviceName": "persistent-disk-0", "mode": "READ_WRITE",
                 "initializeParams": {"image": "projects/x/global/images/family/f", "size": 50,
                                      "type": "pd-standard"}},
    "scheduling": {"automaticRestart": True, "onHostMaintenance": "MIGRATE",
                   "preemptible": False, "provisioningModel": "STANDARD"},
}


def program(accelerator: str = "projects/p/zones/z/acceleratorTypes/nvidia-tesla-t4",
            image: str = "projects/x/global/images/family/f") -> dict:
    return {"guestAccelerators": [{"type": accelerator, "count": 1}],
            "bootDisk": {"initializeParams": {"image": image, "size": 50}},
            "scheduling": {"preemptible": False}}


def test_what_the_program_leaves_out_and_names_by_link_is_no_change() -> None:
    assert settled(INSTANCE, IMPORTED, program()) == IMPORTED
    assert replaced_paths(INSTANCE, IMPORTED, settled(INSTANCE, IMPORTED, program())) == []


def test_another_accelerator_or_image_still_replaces() -> None:
    for news in (program(accelerator="nvidia-l4"), program(image="projects/x/global/images/g")):
        assert replaced_paths(INSTANCE, IMPORTED, settled(INSTANCE, IMPORTED, news)) != []
