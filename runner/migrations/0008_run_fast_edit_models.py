from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0007_resume_and_queue_order"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="fast_model",
            field=models.CharField(
                blank=True, help_text="Model of the quick LLM-backed actions; empty: the run's model.", max_length=200
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="edit_model",
            field=models.CharField(
                blank=True,
                help_text="Model of Edit Script (AI); empty: the fast model, else the run's model.",
                max_length=200,
            ),
        ),
    ]
