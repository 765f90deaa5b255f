"""Lab OS images built by the project (debootstrap), cached by recipe."""

from provisioner.deploy.images.builder import BuiltImage, ImageRecipe, build_lab_image

__all__ = ["BuiltImage", "ImageRecipe", "build_lab_image"]
